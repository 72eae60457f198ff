/* Declarations shared by the library's host sources; not installed. */
#ifndef MSDA_INTERNAL_H
#define MSDA_INTERNAL_H

#include "msda.h"

/* Fills *err (when not NULL) with status, no CUDA result, and a printf-style message; returns
 * status, so that a failing path reads `return msda_fail(err, MSDA_ERR_..., "...", ...);`. */
msda_status msda_fail(msda_error *err, msda_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The validated problem: sizes and the level table, as both paths use them. */
typedef struct msda_problem {
    msda_dtype dtype;
    int64_t N, S, M, D, Lq, L, P;
    int64_t level_h[MSDA_MAX_LEVELS];
    int64_t level_w[MSDA_MAX_LEVELS];
    int64_t level_start[MSDA_MAX_LEVELS];
    int64_t value_elems;  /* N * S * M * D */
    int64_t output_elems; /* N * Lq * M * D */
    int64_t weight_elems; /* N * Lq * M * L * P (locations: twice as many) */
} msda_problem;

/* Checks the sizes and the level table and fills *pb. Pointers are checked by the callers. */
msda_status msda_check_problem(msda_dtype dtype, const msda_sizes *sizes, const int64_t *shapes,
                               const int64_t *starts, msda_problem *pb, msda_error *err);

/* Bytes of one element of dtype (assumed valid). */
size_t msda_dtype_size(msda_dtype dtype);

/* Lower-case name of a dtype ("f32", ...), "?" when invalid. */
const char *msda_dtype_name(msda_dtype dtype);

#endif /* MSDA_INTERNAL_H */
