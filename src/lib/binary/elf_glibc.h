/* What a host shared object asks of the system it is loaded on: the glibc symbol versions it
 * needs (its manylinux floor, docs/FACTS.md "Wheels"), which symbols raise that floor, its CPU and
 * the libraries it links (DT_NEEDED). Read through libelf; any host can read x86_64 and aarch64
 * objects.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_ELF_GLIBC_H
#define MD_ELF_GLIBC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

/* A glibc symbol version: GLIBC_2.2.5 is {2, 2, 5}. */
typedef struct {
    unsigned major, minor, patch;
} md_glibc_version;

/* An imported symbol whose glibc version is above the floor the caller asked about. */
typedef struct {
    char *symbol;        /* "dlopen" */
    char *version_name;  /* "GLIBC_2.34" */
    md_glibc_version version;
} md_glibc_symbol;

/* A DT_NEEDED entry. */
typedef struct {
    char *soname;        /* "libc.so.6" */
    bool allowed;        /* on the manylinux_2_17 whitelist; set by md_elf_check_libraries */
} md_elf_needed;

typedef struct {
    unsigned machine;           /* e_machine: 62 x86_64, 183 aarch64, others as read */
    const char *machine_name;   /* its platform's name (platform.h): "x86_64"; NULL for another CPU */
    md_glibc_version glibc;     /* the highest GLIBC_x.y[.z] needed; {0,0,0} when none */
    char glibc_name[32];        /* that version as written: "GLIBC_2.34", or "" */
    bool glibc_private;         /* GLIBC_PRIVATE is needed: no manylinux tag is honest */
    md_glibc_symbol *above;     /* symbols needing more than the floor, in .dynsym order */
    size_t n_above;
    md_elf_needed *needed;      /* DT_NEEDED, in file order */
    size_t n_needed;
    size_t n_disallowed;        /* needed[] entries off the whitelist (md_elf_check_libraries) */
} md_elf_glibc;

/* Reads the ELF shared object (or executable) at DATA, SIZE bytes, into OUT, which the caller
 * releases with md_elf_glibc_free (also after a failure). Symbols whose glibc version is above
 * FLOOR_MAJOR.FLOOR_MINOR are listed in OUT->above (patch levels are ignored there: GLIBC_2.2.5
 * is not above 2.2). The floor is taken from the version-needs section alone; an object without
 * one (no versioned glibc symbol) reports {0,0,0}. Section headers are required (an object
 * stripped of them by sstrip gives MD_ERR_FORMAT). GLIBC_ABI_DT_RELR counts as 2.36 (the
 * glibc that introduced it). DATA must stay valid and writable during the call (libelf may
 * adjust its view; the bytes are not changed for native byte order).
 * MD_ERR_UNKNOWN_TYPE when DATA is not ELF or is a relocatable object; MD_ERR_FORMAT when it is
 * truncated or malformed; MD_ERR_NOMEM. */
md_status md_elf_glibc_read(uint8_t *data, size_t size, unsigned floor_major, unsigned floor_minor,
                            md_elf_glibc *out, md_error *err);

/* The same for the file PATH (MD_ERR_IO when it cannot be read). */
md_status md_elf_glibc_read_file(const char *path, unsigned floor_major, unsigned floor_minor,
                                 md_elf_glibc *out, md_error *err);

/* Marks each INFO->needed[i].allowed from the manylinux_2_17 allowed libraries (platform.h,
 * recipes/platforms.json) and counts the others in INFO->n_disallowed.
 * MD_ERR_INTERNAL when the recipe is broken. */
md_status md_elf_check_libraries(md_elf_glibc *info, md_error *err);

/* Compares versions: negative, 0 or positive as A is older than, equal to or newer than B. */
int md_glibc_version_compare(md_glibc_version a, md_glibc_version b);

/* Parses "GLIBC_2.34" or "GLIBC_2.2.5" into OUT. False for anything else (GLIBC_PRIVATE,
 * GLIBCXX_3.4, trailing text). */
bool md_glibc_version_parse(const char *name, md_glibc_version *out);

void md_elf_glibc_free(md_elf_glibc *info);

#endif
