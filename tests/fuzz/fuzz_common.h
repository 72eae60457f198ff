/* Shared by the fuzz targets: the input as a file, read as `msda-doctor inspect` reads one. */
#ifndef MD_FUZZ_COMMON_H
#define MD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Members larger than this are refused (MSDA_MAX_MEMBER_SIZE), so that a zip bomb costs the
 * fuzzer milliseconds, not seconds; the limit itself is what is exercised. */
#define FUZZ_MAX_MEMBER ((uint64_t)16 << 20)

/* fuzz_recipe's first byte: which table reader gets the rest (tests/fuzz/seeds writes it). */
enum {
    FUZZ_RECIPE_ARCHITECTURES,
    FUZZ_RECIPE_TOOLKITS,
    FUZZ_RECIPE_PLATFORMS,
    FUZZ_RECIPE_JETSON,
    FUZZ_RECIPE_REDIST,
    FUZZ_RECIPE_SIGNATURES,
    FUZZ_RECIPE_LIBMSDA,
    FUZZ_RECIPE_COUNT
};

/* fuzz_probe's first byte: which probe's text parser gets the rest. */
enum { FUZZ_PROBE_SMI_CC, FUZZ_PROBE_SMI, FUZZ_PROBE_TEGRA, FUZZ_PROBE_COUNT };

/* Sets MSDA_MAX_MEMBER_SIZE to FUZZ_MAX_MEMBER (once). */
void fuzz_setup(void);

/* An in-memory file holding DATA, positioned at 0; -1 when it cannot be made. */
int fuzz_memfd(const uint8_t *data, size_t size);

/* md_inspect_path on a file holding DATA; everything it returns is freed. */
void fuzz_inspect_bytes(const uint8_t *data, size_t size);

/* A private folder for this process, removed at exit; NULL when it cannot be made. */
const char *fuzz_scratch_dir(void);

/* Writes DATA to DIR/NAME (replacing it); 0 on success. */
int fuzz_write_file(const char *dir, const char *name, const uint8_t *data, size_t size);

/* DATA as a NUL-terminated string (cut at its first NUL), malloc'd; NULL when out of memory. */
char *fuzz_text(const uint8_t *data, size_t size);

#endif
