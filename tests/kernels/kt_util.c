/* Test helpers: random problems, conversions, library wrappers, error measures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "msda_half.h"

uint64_t kt_rand_u64(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

double kt_rand_unit(uint64_t *s) { return (double)(kt_rand_u64(s) >> 11) * 0x1p-53; }

double *kt_alloc(int64_t n) {
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    ck_assert_msg(p != NULL, "out of memory for %lld doubles", (long long)n);
    return p;
}

/* Special locations, in level units: border, just inside/outside the (-1, H) range, far, NaN. */
static double special_coord(uint64_t *s, int64_t size) {
    const double n = (double)size;
    switch (kt_rand_u64(s) % 12) {
    case 0: return 0.0;
    case 1: return 1.0;
    case 2: return -0.49 / n;        /* h = -0.99: inside, only the far corners exist */
    case 3: return -0.5 / n;         /* h = -1: outside */
    case 4: return (n + 0.49) / n;   /* h = H - 0.01: inside */
    case 5: return (n + 0.5) / n;    /* h = H: outside */
    case 6: return 0.5 / n;          /* exactly on pixel 0's centre */
    case 7: return 7.5;
    case 8: return -3.0;
    case 9: return NAN;
    case 10: return INFINITY;
    default: return -INFINITY;
    }
}

kt_case *kt_make(int64_t N, int64_t Lq, int64_t M, int64_t D, int64_t L, int64_t P,
                 const int64_t *hw, double special, uint64_t seed) {
    kt_case *c = calloc(1, sizeof *c);
    ck_assert_ptr_nonnull(c);
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    c->N = N, c->Lq = Lq, c->M = M, c->D = D, c->L = L, c->P = P;
    for (int64_t l = 0; l < L; l++) {
        c->shapes[2 * l] = hw[2 * l];
        c->shapes[2 * l + 1] = hw[2 * l + 1];
        c->starts[l] = c->S;
        c->S += hw[2 * l] * hw[2 * l + 1];
    }
    c->n_value = N * c->S * M * D;
    c->n_out = N * Lq * M * D;
    c->n_attn = N * Lq * M * L * P;
    c->value = kt_alloc(c->n_value);
    c->gout = kt_alloc(c->n_out);
    c->attn = kt_alloc(c->n_attn);
    c->loc = kt_alloc(2 * c->n_attn);
    for (int64_t i = 0; i < c->n_value; i++) c->value[i] = 2 * kt_rand_unit(&s) - 1;
    for (int64_t i = 0; i < c->n_out; i++) c->gout[i] = 2 * kt_rand_unit(&s) - 1;
    for (int64_t i = 0; i < c->n_attn; i++) {
        const int64_t l = (i / P) % L;
        c->attn[i] = kt_rand_unit(&s);
        for (int k = 0; k < 2; k++) {
            const int64_t size = c->shapes[2 * l + 1 - k]; /* x scales by W, y by H */
            c->loc[2 * i + k] = kt_rand_unit(&s) < special ? special_coord(&s, size)
                                                           : 1.2 * kt_rand_unit(&s) - 0.1;
        }
    }
    return c;
}

void kt_free(kt_case *c) {
    if (!c) return;
    free(c->value);
    free(c->gout);
    free(c->attn);
    free(c->loc);
    free(c);
}

static double round_to(double x, msda_dtype dtype) {
    switch (dtype) {
    case MSDA_F32: return (float)x;
    case MSDA_F16: return msda_f16_to_f32(msda_f32_to_f16((float)x));
    case MSDA_BF16: return msda_bf16_to_f32(msda_f32_to_bf16((float)x));
    default: return x;
    }
}

void kt_round(kt_case *c, msda_dtype dtype) {
    c->f32_coords = dtype != MSDA_F64;
    for (int64_t i = 0; i < c->n_value; i++) c->value[i] = round_to(c->value[i], dtype);
    for (int64_t i = 0; i < c->n_out; i++) c->gout[i] = round_to(c->gout[i], dtype);
    for (int64_t i = 0; i < c->n_attn; i++) c->attn[i] = round_to(c->attn[i], dtype);
    for (int64_t i = 0; i < 2 * c->n_attn; i++) c->loc[i] = round_to(c->loc[i], dtype);
}

void kt_round_mixed(kt_case *c, msda_dtype dtype) {
    c->f32_coords = 1;
    for (int64_t i = 0; i < c->n_value; i++) c->value[i] = round_to(c->value[i], dtype);
    for (int64_t i = 0; i < c->n_out; i++) c->gout[i] = round_to(c->gout[i], dtype);
    for (int64_t i = 0; i < c->n_attn; i++) c->attn[i] = round_to(c->attn[i], MSDA_F32);
    for (int64_t i = 0; i < 2 * c->n_attn; i++) c->loc[i] = round_to(c->loc[i], MSDA_F32);
}

void *kt_to_dtype(const double *x, int64_t n, msda_dtype dtype) {
    const size_t elem = dtype == MSDA_F64 ? 8 : dtype == MSDA_F32 ? 4 : 2;
    unsigned char *p = malloc((size_t)(n > 0 ? n : 1) * elem);
    ck_assert_ptr_nonnull(p);
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case MSDA_F64: ((double *)p)[i] = x[i]; break;
        case MSDA_F32: ((float *)p)[i] = (float)x[i]; break;
        case MSDA_F16: ((uint16_t *)p)[i] = msda_f32_to_f16((float)x[i]); break;
        case MSDA_BF16: ((uint16_t *)p)[i] = msda_f32_to_bf16((float)x[i]); break;
        }
    }
    return p;
}

void kt_from_dtype(const void *x, int64_t n, msda_dtype dtype, double *out) {
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case MSDA_F64: out[i] = ((const double *)x)[i]; break;
        case MSDA_F32: out[i] = ((const float *)x)[i]; break;
        case MSDA_F16: out[i] = msda_f16_to_f32(((const uint16_t *)x)[i]); break;
        case MSDA_BF16: out[i] = msda_bf16_to_f32(((const uint16_t *)x)[i]); break;
        }
    }
}

/* Filled with a pattern that is no plausible result (NaN), so an unwritten element fails. */
static void *poisoned(int64_t n, msda_dtype dtype) {
    const size_t elem = dtype == MSDA_F64 ? 8 : dtype == MSDA_F32 ? 4 : 2;
    void *p = malloc((size_t)n * elem);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xff, (size_t)n * elem);
    return p;
}

msda_status kt_lib_forward(const kt_case *c, msda_dtype dtype, int threads, double *out) {
    return kt_lib_forward_c(c, dtype, MSDA_COORD_SAME, threads, out);
}

msda_status kt_lib_backward(const kt_case *c, msda_dtype dtype, int threads, double *gvalue,
                            double *gloc, double *gattn) {
    return kt_lib_backward_c(c, dtype, MSDA_COORD_SAME, threads, gvalue, gloc, gattn);
}

msda_status kt_lib_forward_c(const kt_case *c, msda_dtype dtype, msda_coord_type coord,
                             int threads, double *out) {
    const msda_dtype ct = coord == MSDA_COORD_F32 ? MSDA_F32 : dtype;
    msda_forward_args a = {
        .dtype = dtype,
        .coord_type = coord,
        .weights = c->weights,
        .sizes = {c->N, c->S, c->M, c->D, c->Lq, c->L, c->P},
        .spatial_shapes = c->shapes,
        .level_start = c->starts,
        .value = kt_to_dtype(c->value, c->n_value, dtype),
        .sampling_locations = kt_to_dtype(c->loc, 2 * c->n_attn, ct),
        .attention_weights = kt_to_dtype(c->attn, c->n_attn, ct),
        .output = poisoned(c->n_out, dtype),
    };
    msda_error err;
    const msda_status st = msda_forward_cpu(&a, threads, &err);
    ck_assert_msg(st == MSDA_OK, "msda_forward_cpu: %s", err.message);
    kt_from_dtype(a.output, c->n_out, dtype, out);
    free((void *)a.value);
    free((void *)a.sampling_locations);
    free((void *)a.attention_weights);
    free(a.output);
    return st;
}

msda_status kt_lib_backward_c(const kt_case *c, msda_dtype dtype, msda_coord_type coord,
                              int threads, double *gvalue, double *gloc, double *gattn) {
    const msda_dtype ct = coord == MSDA_COORD_F32 ? MSDA_F32 : dtype;
    msda_backward_args a = {
        .dtype = dtype,
        .coord_type = coord,
        .weights = c->weights,
        .sizes = {c->N, c->S, c->M, c->D, c->Lq, c->L, c->P},
        .spatial_shapes = c->shapes,
        .level_start = c->starts,
        .value = kt_to_dtype(c->value, c->n_value, dtype),
        .sampling_locations = kt_to_dtype(c->loc, 2 * c->n_attn, ct),
        .attention_weights = kt_to_dtype(c->attn, c->n_attn, ct),
        .grad_output = kt_to_dtype(c->gout, c->n_out, dtype),
        .grad_value = poisoned(c->n_value, dtype),
        .grad_sampling_locations = poisoned(2 * c->n_attn, ct),
        .grad_attention_weights = poisoned(c->n_attn, ct),
    };
    msda_error err;
    const msda_status st = msda_backward_cpu(&a, threads, &err);
    ck_assert_msg(st == MSDA_OK, "msda_backward_cpu: %s", err.message);
    kt_from_dtype(a.grad_value, c->n_value, dtype, gvalue);
    kt_from_dtype(a.grad_sampling_locations, 2 * c->n_attn, ct, gloc);
    kt_from_dtype(a.grad_attention_weights, c->n_attn, ct, gattn);
    free((void *)a.value);
    free((void *)a.sampling_locations);
    free((void *)a.attention_weights);
    free((void *)a.grad_output);
    free(a.grad_value);
    free(a.grad_sampling_locations);
    free(a.grad_attention_weights);
    return st;
}

double kt_rel_err(const double *a, const double *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) && isfinite(ref[i])) return INFINITY;
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    if (den == 0) return sqrt(num);
    return sqrt(num / den);
}

const kt_dtype_run kt_dtype_runs[KT_DTYPE_RUNS] = {
    {MSDA_F64, MSDA_COORD_SAME, 1e-12, 1e-12}, {MSDA_F32, MSDA_COORD_SAME, 1e-5, 1e-5},
    {MSDA_F16, MSDA_COORD_SAME, 1e-2, 1e-2},   {MSDA_BF16, MSDA_COORD_SAME, 2e-2, 2e-2},
    {MSDA_F16, MSDA_COORD_F32, 1e-2, 1e-4},    {MSDA_BF16, MSDA_COORD_F32, 2e-2, 1e-4},
};
