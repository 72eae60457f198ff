/* The driver table (recipes/drivers.json): which CUDA version each Linux driver branch runs, and
 * the first driver of the versions minor-version compatibility starts from. Its one reader; a
 * driver named on the command line ("535", "535.104.05", "r32") is parsed here.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_DRIVER_TABLE_H
#define MD_DRIVER_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

typedef struct {
    char name[32];    /* as given, trimmed: "535", "535.104.05", "r32" */
    int cuda;         /* the CUDA version it runs, as cuDriverGetVersion says it: 12020 */
    bool tegra;       /* a Jetson driver (an L4T line): no minor-version compatibility documented */
} md_driver;

/* Loads the embedded table once; later calls return at once. Not thread-safe on first call.
 * MD_ERR_INTERNAL naming the entry when the recipe is malformed (branches must ascend). */
md_status md_driver_table_load(md_error *err);

/* Replaces the table with one read from DOC, shaped like drivers.json. On failure it is empty. */
md_status md_driver_table_load_json(json_t *doc, md_error *err);

void md_driver_table_free(void);

/* The CUDA version a Linux driver of BRANCH (535) runs: the newest branch of the table not above
 * it; 0 when BRANCH is older than every branch. */
int md_driver_cuda_of_branch(unsigned branch);

/* TEXT names a driver: a Linux branch or full version ("535", "535.104.05"), an L4T line
 * ("r32", "R35", "r36.4.3": recipes/jetson.json's CUDA), or a CUDA version ("cuda12.2").
 * MD_ERR_ARGUMENT with what is accepted when it names none. */
md_status md_driver_parse(const char *text, md_driver *out, md_error *err);

/* The oldest Linux driver that runs CUDA version CUDA, into OUT: the floor's exact number where
 * the table has one ("450.80.02"), else the first branch ("535"). False when no branch does. */
bool md_driver_min_for_cuda(int cuda, char *out, size_t size);

/* "driver >= 450.80.02 (CUDA 11.0)" for code that needs CUDA version NEEDS_CUDA ("a driver of
 * CUDA 14.0 or newer" where no branch is known for it); "" when NEEDS_CUDA is 0, not known. The
 * one wording of a driver need, for inspect and diagnose. */
void md_driver_need_text(int needs_cuda, char *out, size_t size);

#endif
