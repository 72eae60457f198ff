/* Helpers of the libmsda CPU tests: random problems, a plain f64 reference written from the
 * formula in msda.h, dtype conversion of whole arrays, and error measures. */
#ifndef KT_H
#define KT_H

#include <check.h>
#include <stdint.h>

#include "msda.h"

/* One problem with f64 master copies of every input. */
typedef struct kt_case {
    int64_t N, S, M, D, Lq, L, P;
    int64_t shapes[2 * MSDA_MAX_LEVELS];
    int64_t starts[MSDA_MAX_LEVELS];
    double *value, *loc, *attn, *gout;
    int64_t n_value, n_out, n_attn; /* element counts; locations: 2 * n_attn */
    int f32_coords; /* the reference computes h = y*H - 0.5 in f32, as the library does for
                       f32, f16 and bf16, so both take the same corners at pixel boundaries */
    msda_weights weights; /* what the library calls pass: attn as weights or as logits; the
                             reference always reads attn as weights (kt_softmax_rows) */
} kt_case;

/* Random inputs (value and grad_output in [-1, 1], weights in [0, 1], locations in
 * [-0.1, 1.1]); `special` of the locations replaced by border, outside and non-finite values
 * (0, 1, just inside and just outside the valid range, far outside, NaN, +-inf). */
kt_case *kt_make(int64_t N, int64_t Lq, int64_t M, int64_t D, int64_t L, int64_t P,
                 const int64_t *hw, double special, uint64_t seed);
void kt_free(kt_case *c);

/* Rounds every master input to dtype (so the reference sees what the library sees) and sets
 * f32_coords for the dtypes computed in f32. */
void kt_round(kt_case *c, msda_dtype dtype);
/* The same for mixed precision: value and grad_output rounded to dtype, the locations and
 * weights to f32 (msda.h, MSDA_COORD_F32). */
void kt_round_mixed(kt_case *c, msda_dtype dtype);

/* The reference: forward and the three gradients, in f64, straight from the formula. */
void kt_ref_forward(const kt_case *c, double *out);
void kt_ref_backward(const kt_case *c, double *gvalue, double *gloc, double *gattn);

/* Library calls on the CPU path in dtype, results converted to f64 (arrays of the sizes). */
msda_status kt_lib_forward(const kt_case *c, msda_dtype dtype, int threads, double *out);
msda_status kt_lib_backward(const kt_case *c, msda_dtype dtype, int threads, double *gvalue,
                            double *gloc, double *gattn);
/* As those, with the locations and weights (and their gradients) in the type coord gives. */
msda_status kt_lib_forward_c(const kt_case *c, msda_dtype dtype, msda_coord_type coord,
                             int threads, double *out);
msda_status kt_lib_backward_c(const kt_case *c, msda_dtype dtype, msda_coord_type coord,
                              int threads, double *gvalue, double *gloc, double *gattn);

/* Converted copies (malloc'ed) and back. */
void *kt_to_dtype(const double *x, int64_t n, msda_dtype dtype);
void kt_from_dtype(const void *x, int64_t n, msda_dtype dtype, double *out);

/* ||a - ref|| / ||ref|| (2-norms); +inf where a has a non-finite value that ref has not. */
double kt_rel_err(const double *a, const double *ref, int64_t n);

double *kt_alloc(int64_t n); /* zeroed; aborts the test on failure */

/* Each dtype, and f16 and bf16 beside f32 coordinates, with the tolerances the CPU tests hold
 * them to against an f64 reference: the output's and grad_value's (tol_out), the coordinates'
 * gradients' (tol_coord: f32 ones beside a 16-bit value far tighter than 16-bit ones). */
typedef struct kt_dtype_run {
    msda_dtype dtype;
    msda_coord_type coord;
    double tol_out, tol_coord;
} kt_dtype_run;
#define KT_DTYPE_RUNS 6
extern const kt_dtype_run kt_dtype_runs[KT_DTYPE_RUNS];

uint64_t kt_rand_u64(uint64_t *state);
double kt_rand_unit(uint64_t *state); /* [0, 1) */

TCase *kt_tcase_cpu(void);
TCase *kt_tcase_gradcheck(void);
TCase *kt_tcase_api(void);
TCase *kt_tcase_half(void);
TCase *kt_tcase_softmax(void);
TCase *kt_tcase_plan(void);
TCase *kt_tcase_launch(void);
TCase *kt_tcase_images(void);
TCase *kt_tcase_points(void);

#endif
