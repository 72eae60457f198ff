/* The CUDA toolkit table (recipes/toolkits.json): what each nvcc release targets, the newest host
 * gcc it accepts and the oldest driver it needs. Its one reader; the rest ask it.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_TOOLKIT_TABLE_H
#define MD_TOOLKIT_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

typedef struct {
    char version[16];         /* "11.8" */
    unsigned major, minor;
    unsigned sm_min, sm_max;  /* real architectures it targets, both ends included */
    unsigned max_gcc;         /* newest host gcc major */
    char min_driver[24];      /* oldest Linux driver: "520.61.05" */
    char redist_release[16];  /* a release `fetch --cuda` takes: "11.8.0"; "" when NVIDIA has none */
    unsigned ptx_isa;         /* the PTX ISA it writes, major * 10 + minor: 78 for 7.8 */
    int sass_needs_cuda;      /* the driver's CUDA version from which its SASS loads: 11000 */
} md_toolkit_row;

/* Loads the embedded table once; later calls return at once. Not thread-safe on first call.
 * MD_ERR_INTERNAL naming the entry when the recipe is malformed (rows must be complete and
 * ascending by version). The lookups below load it themselves and find nothing when that fails. */
md_status md_toolkit_table_load(md_error *err);

/* Replaces the table with one read from DOC, a document shaped like toolkits.json (tests feed
 * it broken ones). The caller keeps DOC. On failure the table is left empty. */
md_status md_toolkit_table_load_json(json_t *doc, md_error *err);

/* Frees the loaded table (for leak-checked tests). */
void md_toolkit_table_free(void);

/* All rows, oldest first; *count receives their number (0 when the table cannot be loaded). */
const md_toolkit_row *md_toolkit_rows(unsigned *count);

/* The row of exactly VERSION ("11.8"), or NULL. */
const md_toolkit_row *md_toolkit_row_find(const char *version);

/* The row whose limits hold for an nvcc MAJOR.MINOR: the newest not newer than it within the
 * same major version (12.5 gets 12.4's), or NULL when the table has none. */
const md_toolkit_row *md_toolkit_row_for(unsigned major, unsigned minor);

/* The newest row that targets SM (any when 0) and whose CUDA a driver of API version MAX_API
 * (12040 for 12.4) runs (any when 0), or NULL. */
const md_toolkit_row *md_toolkit_row_newest_for(unsigned sm, int max_api);

/* The newest row that targets SM (any when 0) and whose SASS a driver of CUDA version
 * DRIVER_CUDA (12020) loads (its sass_needs_cuda is not newer), only those `fetch` takes (a
 * redist_release) when FETCHABLE; NULL when none. */
const md_toolkit_row *md_toolkit_row_newest_loading(unsigned sm, int driver_cuda, bool fetchable);

/* The oldest and the newest rows that target SM into *OLDEST and *NEWEST; false (both NULL)
 * when none does. */
bool md_toolkit_rows_targeting(unsigned sm, const md_toolkit_row **oldest, const md_toolkit_row **newest);

/* CUDA versions are written as the driver API writes them: X.Y is X * 1000 + Y * 10 (12020). */

/* The driver CUDA version from which SASS written by nvcc MAJOR.MINOR loads: its row's (the
 * newest row not newer than it within its major version); for a major the table lacks, MAJOR.0.
 * 0 when MAJOR.MINOR is older than every row. */
int md_sass_needs_cuda(unsigned major, unsigned minor);

/* The driver CUDA version from which PTX of ISA ISA (major * 10 + minor) JIT-compiles: that of
 * the oldest toolkit writing that ISA or a newer one. 0 when the ISA is newer than every row. */
int md_ptx_needs_cuda(unsigned isa);

/* "12.2" for 12020; "unknown" for 0 or less. */
void md_cuda_version_text(int cuda, char *out, size_t size);

/* 12020 for "12.2" (also "12.2.1": the patch is dropped); -1 when TEXT is not MAJOR.MINOR. */
int md_cuda_version_parse(const char *text);

#endif
