/* Shared by the fuzz targets: the input as a file, read as `msda-doctor inspect` reads one. */
#ifndef MD_FUZZ_COMMON_H
#define MD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Members larger than this are refused (MSDA_MAX_MEMBER_SIZE), so that a zip bomb costs the
 * fuzzer milliseconds, not seconds; the limit itself is what is exercised. */
#define FUZZ_MAX_MEMBER ((uint64_t)16 << 20)

/* Sets MSDA_MAX_MEMBER_SIZE to FUZZ_MAX_MEMBER (once). */
void fuzz_setup(void);

/* An in-memory file holding DATA, positioned at 0; -1 when it cannot be made. */
int fuzz_memfd(const uint8_t *data, size_t size);

/* md_inspect_path on a file holding DATA; everything it returns is freed. */
void fuzz_inspect_bytes(const uint8_t *data, size_t size);

#endif
