/* The dynamic symbols of ELF shared objects, for diagnose: which names an extension imports, and
 * which of them a set of libraries (torch's) exports. Read through libelf from the file, which
 * libelf maps; nothing of a library's symbol table is copied but the names asked about.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_ELF_SYMBOLS_H
#define MD_ELF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

/* Sorted, distinct, malloc'd names. */
typedef struct {
    char **names;
    size_t n;
} md_symbol_list;

/* The undefined (imported) global and weak symbols of the object at PATH's .dynsym that KEEP
 * accepts (every one when KEEP is NULL), into OUT (released with md_symbol_list_free, also after
 * a failure). MD_ERR_IO when PATH cannot be read; MD_ERR_UNKNOWN_TYPE when it is not an ELF
 * shared object or executable; MD_ERR_FORMAT when it is malformed; MD_ERR_NOMEM. */
md_status md_elf_imports(const char *path, bool (*keep)(const char *name), md_symbol_list *out, md_error *err);

/* Sets FOUND[i] for each WANTED->names[i] that the object at PATH defines in its .dynsym
 * (leaves the others as they are, so that several libraries can be asked in turn). Errors as
 * md_elf_imports. */
md_status md_elf_mark_exports(const char *path, const md_symbol_list *wanted, bool *found, md_error *err);

void md_symbol_list_free(md_symbol_list *list);

/* Whether the object at PATH defines the symbol version VERSION ("GLIBCXX_3.4.30") in its
 * .gnu.version_d: 1 or 0; -1 with ERR set when it cannot be read (errors as md_elf_imports). */
/* Whether the object at PATH defines (exports) a dynamic symbol whose name contains PART: 1 or
 * 0; -1 with ERR set when it cannot be read. */
int md_elf_exports_containing(const char *path, const char *part, md_error *err);

int md_elf_defines_version(const char *path, const char *version, md_error *err);

#endif
