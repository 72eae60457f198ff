/* The CPU platforms that wheels are built for (recipes/platforms.json): each platform's ELF
 * machine, cross tools and glibc base version, the libraries a manylinux_2_17 object may link,
 * and the glibc symbols the build pins to the base version. Its one reader; the rest ask it.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_PLATFORM_H
#define MD_PLATFORM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

typedef struct {
    char name[16];            /* "aarch64": the wheel tag's and `build --platform`'s name */
    unsigned machine;         /* ELF e_machine: 62, 183 */
    char cross_compiler[64];  /* what builds for it on another CPU: "aarch64-linux-gnu-gcc" */
    char glibc_base[16];      /* "2.17": the oldest GLIBC_ symbol version there */
    char qemu[32];            /* "qemu-aarch64": runs this CPU's binaries on the other one */
    char sysroot[128];        /* "/usr/aarch64-linux-gnu": Debian's cross C library for it */
} md_platform;

/* Loads the embedded table once; later calls return at once. Not thread-safe on first call.
 * MD_ERR_INTERNAL naming the entry when the recipe is malformed. The lookups below load it
 * themselves and find nothing when that fails. */
md_status md_platform_table_load(md_error *err);

/* Replaces the table with one read from DOC, a document shaped like platforms.json (tests feed
 * it broken ones). The caller keeps DOC. On failure the table is left empty. */
md_status md_platform_table_load_json(json_t *doc, md_error *err);

/* Frees the loaded table (for leak-checked tests); pointers the lookups gave become invalid. */
void md_platform_table_free(void);

/* All platforms in the recipe's order; *count receives their number. */
const md_platform *md_platform_all(unsigned *count);

/* The platform named NAME ("x86_64"), or NULL when there is none. */
const md_platform *md_platform_find(const char *name);

/* The platform whose ELF e_machine is MACHINE, or NULL. */
const md_platform *md_platform_by_machine(unsigned machine);

/* The glibc base version of platform NAME ("2.17"), or NULL when there is no such platform. */
const char *md_platform_glibc_base(const char *name);

/* The platform names joined with ", " into OUT ("x86_64, aarch64"), for messages that list
 * what would have been accepted. */
void md_platform_names(char *out, size_t size);

/* The sonames an object in a manylinux_2_17 wheel may list in DT_NEEDED; *count their number. */
const char *const *md_platform_allowed_libraries(unsigned *count);

/* True when SONAME ("libc.so.6") is on that list. */
bool md_platform_library_allowed(const char *soname);

/* The functions the build binds to each platform's glibc_base with .symver ("dlopen", ...);
 * *count their number. The same list for every platform. */
const char *const *md_platform_pinned_symbols(unsigned *count);

#endif
