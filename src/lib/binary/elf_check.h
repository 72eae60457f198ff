/* Checks of an ELF image's geometry against its real size, for files other people made: libelf
 * trusts the headers it parses (a section header table cut off becomes "no sections", a section
 * pointing past the end becomes an error only when its data is asked for), so the readers ask
 * here first and never give a plausible answer for a corrupt file.
 * Scope: private to src/lib/binary. */
#ifndef MD_ELF_CHECK_H
#define MD_ELF_CHECK_H

#include <libelf.h>
#include <stddef.h>
#include "base/status.h"

/* libelf's message for its last error, or FALLBACK when it has none: elf_errmsg(-1) says
 * "no error" then, which explains nothing. */
const char *md_elf_why(const char *fallback);

/* Fails ERR for a libelf call that returned nothing: MD_ERR_NOMEM ("out of memory reading the
 * KIND") when it failed to allocate (errno ENOMEM: callers clear errno before their libelf
 * calls), else MD_ERR_FORMAT "corrupt KIND: " and libelf's reason or FALLBACK. */
md_status md_elf_fail(md_error *err, const char *kind, const char *fallback);

/* Checks the ELF ELF of SIZE bytes (opened with elf_memory): the section header table lies
 * inside the file with the entry size of its class; the section count and the section-name
 * table index are in range; every section but SHT_NOBITS lies inside the file; every name is
 * inside the section-name table; a symbol table's sh_link names a string table and its size is
 * a whole number of entries. MD_OK, or MD_ERR_FORMAT saying what is wrong (KIND, "ELF file" or
 * "cubin", starts the message). On MD_OK, *SHNUM and *SHSTRNDX (when not NULL) are the counts. */
md_status md_elf_check(Elf *elf, size_t size, const char *kind, size_t *shnum, size_t *shstrndx,
                       md_error *err);

#endif
