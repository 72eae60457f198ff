/* Finding and reading the GPU code in files: ELF host binaries (the .nv_fatbin section),
 * standalone fatbins and cubins, wheels (every shared object inside), and directories.
 * Scope: public: src/cli may include it. */
#ifndef MD_INSPECT_H
#define MD_INSPECT_H

#include "devcode.h"

typedef struct {
    md_binary bin;        /* bin.path is always set; entries only when status is MD_OK */
    md_status status;     /* MD_OK, or why this file could not be read */
    char message[512];    /* the error, when status is not MD_OK */
} md_inspected;

typedef struct {
    md_inspected *items;
    size_t count;
    size_t skipped;       /* files under a directory that hold no GPU code */
} md_inspection;

/* Reads PATH and appends one item per binary to OUT: one for a file, one per shared object for
 * a wheel, one per ELF with device code, fatbin, cubin or wheel member under a directory.
 * A file that cannot be read becomes an item with its status; the call itself fails only when
 * out of memory or the embedded toolkit table is broken. Files are mapped, not copied, and wheel members are streamed through an
 * unlinked temporary file under TMPDIR, at most MSDA_MAX_MEMBER_SIZE (default 2 GiB) each, so
 * memory and disk stay bounded whatever their size. FIFOs, devices and sockets are refused by
 * type (skipped under a directory) and never opened for reading. */
md_status md_inspect_path(const char *path, md_inspection *out, md_error *err);

void md_inspection_free(md_inspection *ins);

#endif
