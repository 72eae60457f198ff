/* The build's inputs (the kernels' sources and libmsda.json, the Python package's sources) as
 * they were when this msda-doctor was compiled: tools/embed.c writes them into the binary, so
 * that an installed msda-doctor builds from any folder without a checkout.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_EMBEDDED_SOURCE_H
#define MD_EMBEDDED_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

struct md_embedded_file {
    const char *path;          /* relative to the project folder: "kernels/msda.h" */
    const unsigned char *data;
    size_t size;
    bool executable;
};

/* Generated; terminated by an entry whose path is NULL. */
extern const struct md_embedded_file md_embedded_sources[];

/* The folder name the embedded sources unpack into: "source-" and the first 16 hex digits of a
 * sha256 over every path, mode and content, so that two msda-doctor binaries with different
 * sources never share one. */
#define MD_EMBEDDED_SOURCE_DIR_MAX 32
bool md_embedded_source_name(char *out, size_t size);

/* Unpacks the embedded sources once into PARENT/<md_embedded_source_name> (PARENT is created)
 * and writes that folder into DIR. The files are written into a temporary sibling and renamed
 * into place complete, so a build interrupted half way, or two run at once, never leaves or
 * sees a partial folder; one already there is used as it is.
 * MD_ERR_IO when PARENT or the files cannot be written; MD_ERR_NOMEM. */
md_status md_embedded_source_unpack(const char *parent, char *dir, size_t size, md_error *err);

#endif
