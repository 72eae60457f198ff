/* Declarations shared by the library's host sources; not installed. */
#ifndef MSDA_INTERNAL_H
#define MSDA_INTERNAL_H

#include "msda.h"

/* The most elements a tensor of the op (msda_validate.c) or a workspace (msda_launch.c) may hold,
 * so that byte offsets (x8) and lane counts (x32) of any of them still fit in int64 in the
 * kernels. */
#define MSDA_MAX_ELEMS (INT64_MAX / 256)

/* Fills *err (when not NULL) with status, no CUDA result, and a printf-style message; returns
 * status, so that a failing path reads `return msda_fail(err, MSDA_ERR_..., "...", ...);`. */
msda_status msda_fail(msda_error *err, msda_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The CPU path's threads where the caller asks for 0: the CPUs the process may run on. */
int msda_cpu_default_threads(void);

/* The validated problem: sizes and the level table, as both paths use them. */
typedef struct msda_problem {
    msda_dtype dtype;
    int coord_f32;      /* coordinates in f32 beside a 16-bit dtype (f32 coordinates beside an
                           f32 value count as the same type: 0) */
    int table_on_device; /* level_h, level_w, level_start unknown: the table is in device memory */
    int logits;          /* attention_weights are logits: the softmax is fused (MSDA_WEIGHTS_LOGITS) */
    int deterministic;   /* backward: grad_value in exact integer sums (msda_backward_args) */
    int discrete;        /* MSDA_SAMPLING_DISCRETE: the nearest pixel */
    int uniform;         /* every level has P points (level_points NULL or all equal) */
    int64_t N, S, M, D, Lq, L, P; /* P: the largest level's points */
    int64_t LP;          /* a group's points: the sum of level_points (L * P where uniform) */
    int64_t level_points[MSDA_MAX_LEVELS];
    int64_t point_start[MSDA_MAX_LEVELS]; /* the first point of level l within a group */
    int64_t level_h[MSDA_MAX_LEVELS];
    int64_t level_w[MSDA_MAX_LEVELS];
    int64_t level_start[MSDA_MAX_LEVELS];
    int64_t value_elems;  /* N * S * M * D */
    int64_t output_elems; /* N * Lq * M * D */
    int64_t weight_elems; /* N * Lq * M * LP (locations: twice as many) */
} msda_problem;

/* What msda_check_problem checks: the fields the two args structs share. */
typedef struct msda_problem_in {
    msda_dtype dtype;
    msda_coord_type coord_type;
    msda_memory level_table;
    msda_weights weights;
    const msda_sizes *sizes;
    const int64_t *shapes, *starts;
    const int64_t *level_points; /* NULL: P on every level */
    msda_sampling sampling;
} msda_problem_in;

/* Checks the data types, the sizes and the level table (unless it is in device memory) and
 * fills *pb. Pointers are checked by the callers. */
msda_status msda_check_problem(const msda_problem_in *in, msda_problem *pb, msda_error *err);

/* The level of point lp (0 to LP - 1) of a group. */
static inline int64_t msda_level_of_point(const msda_problem *pb, int64_t lp) {
    if (pb->uniform) return lp / pb->P;
    int64_t l = 0;
    while (l + 1 < pb->L && lp >= pb->point_start[l + 1]) l++;
    return l;
}

/* msda_validate_forward / _backward, filling *pb for the caller's work. */
msda_status msda_check_forward(const msda_forward_args *a, msda_problem *pb, msda_error *err);
msda_status msda_check_backward(const msda_backward_args *a, msda_problem *pb, msda_error *err);

/* The msda_problem_in of an args struct. */
msda_problem_in msda_forward_in(const msda_forward_args *a);
msda_problem_in msda_backward_in(const msda_backward_args *a);

/* Bytes of one element of dtype (assumed valid). */
size_t msda_dtype_size(msda_dtype dtype);

/* Lower-case name of a dtype ("f32", ...), "?" when invalid. */
const char *msda_dtype_name(msda_dtype dtype);

#endif /* MSDA_INTERNAL_H */
