/* The fused softmax (msda.h, MSDA_WEIGHTS_LOGITS) on the CPU path: the op on logits against the
 * f64 reference on their softmax, every dtype and mixed precision; the logits' gradient against
 * the softmax's chain rule and against finite differences; rows that are all -inf, or hold a NaN
 * or +inf, come out NaN as torch.softmax makes them, and leave the other rows alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"

/* A softmax per (n, q, m) row of L*P entries, in f64, as torch.softmax computes it. */
static void softmax_rows(const kt_case *c, const double *x, double *w) {
    const int64_t LP = c->L * c->P;
    for (int64_t r = 0; r < c->n_attn / LP; r++) {
        const double *xr = x + r * LP;
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < LP; k++)
            if (xr[k] > mx || isnan(xr[k])) mx = xr[k];
        for (int64_t k = 0; k < LP; k++) sum += exp(xr[k] - mx);
        for (int64_t k = 0; k < LP; k++) w[r * LP + k] = exp(xr[k] - mx) / sum;
    }
}

/* The reference on logits: the plain reference on their softmax, then, for the logits'
 * gradient, the softmax's chain rule w * (g - sum w g) written out as a Jacobian product
 * (sum_k g_k * dw_k/dx_j, dw_k/dx_j = w_k * ([k == j] - w_j)), not the library's formula. */
static void ref_logits(const kt_case *c, double *out, double *gv, double *gl, double *gx) {
    const int64_t LP = c->L * c->P;
    double *w = kt_alloc(c->n_attn), *g = kt_alloc(c->n_attn), *keep = c->attn;
    softmax_rows(c, keep, w);
    kt_case soft = *c;
    soft.attn = w;
    if (out) kt_ref_forward(&soft, out);
    if (gv) {
        kt_ref_backward(&soft, gv, gl, g);
        for (int64_t r = 0; r < c->n_attn / LP; r++)
            for (int64_t j = 0; j < LP; j++) {
                double s = 0;
                for (int64_t k = 0; k < LP; k++)
                    s += g[r * LP + k] * w[r * LP + k] * ((k == j) - w[r * LP + j]);
                gx[r * LP + j] = s;
            }
    }
    free(w), free(g);
}

static const struct {
    const char *name;
    int64_t N, Lq, M, D, L, P;
    int64_t hw[2 * 4];
} configs[] = {
    {"4 levels, 4 points", 2, 5, 2, 8, 4, 4, {6, 7, 3, 4, 2, 2, 1, 1}},
    {"L=1, P=1 (w = 1)", 1, 4, 1, 3, 1, 1, {5, 9}},
    {"D=5, 2 levels, 3 points", 3, 3, 3, 5, 2, 3, {4, 4, 2, 3}},
};
#define N_CONFIGS (int)(sizeof configs / sizeof configs[0])

/* Logits spread over [-4, 4], so that the softmax is far from uniform. */
static kt_case *make_logits(int i, uint64_t seed) {
    kt_case *c = kt_make(configs[i].N, configs[i].Lq, configs[i].M, configs[i].D, configs[i].L,
                         configs[i].P, configs[i].hw, 0.1, seed);
    for (int64_t k = 0; k < c->n_attn; k++) c->attn[k] = 8 * c->attn[k] - 4;
    c->weights = MSDA_WEIGHTS_LOGITS;
    return c;
}

typedef struct {
    double *out, *gv, *gl, *gx;
} results;

static results alloc_results(const kt_case *c) {
    return (results){kt_alloc(c->n_out), kt_alloc(c->n_value), kt_alloc(2 * c->n_attn),
                     kt_alloc(c->n_attn)};
}

static void free_results(results *r) { free(r->out), free(r->gv), free(r->gl), free(r->gx); }

static void run_lib(const kt_case *c, msda_dtype dtype, msda_coord_type coord, int threads, results *r) {
    kt_lib_forward_c(c, dtype, coord, threads, r->out);
    kt_lib_backward_c(c, dtype, coord, threads, r->gv, r->gl, r->gx);
}

/* _i: the config. Uniform dtypes (logits rounded to the dtype), then f16 and bf16 values beside
 * f32 logits and locations; tolerances as the plain op's tests, the f32 gradients of mixed
 * precision far tighter than 16-bit ones. */
START_TEST(logits_match_the_softmax_reference) {
    const kt_dtype_run *runs = kt_dtype_runs;
    for (size_t t = 0; t < KT_DTYPE_RUNS; t++) {
        kt_case *c = make_logits(_i, (uint64_t)(700 + _i));
        if (runs[t].coord == MSDA_COORD_F32)
            kt_round_mixed(c, runs[t].dtype);
        else
            kt_round(c, runs[t].dtype);
        results ref = alloc_results(c), lib = alloc_results(c);
        ref_logits(c, ref.out, ref.gv, ref.gl, ref.gx);
        run_lib(c, runs[t].dtype, runs[t].coord, 0, &lib);
        const double eo = kt_rel_err(lib.out, ref.out, c->n_out), ev = kt_rel_err(lib.gv, ref.gv, c->n_value);
        const double el = kt_rel_err(lib.gl, ref.gl, 2 * c->n_attn), ex = kt_rel_err(lib.gx, ref.gx, c->n_attn);
        ck_assert_msg(eo < runs[t].tol_out && ev < runs[t].tol_out && el < runs[t].tol_coord &&
                          ex < runs[t].tol_coord,
                      "%s, dtype %d coord %d: relative errors output %g, value %g, locations %g, logits %g",
                      configs[_i].name, (int)runs[t].dtype, (int)runs[t].coord, eo, ev, el, ex);
        if (configs[_i].L * configs[_i].P == 1) /* a softmax over one logit is constant 1 */
            for (int64_t k = 0; k < c->n_attn; k++) ck_assert(lib.gx[k] == 0.0);
        free_results(&ref), free_results(&lib);
        kt_free(c);
    }
}
END_TEST

/* The fused op is the plain op on softmaxed weights: same output, value and location gradients
 * bit for bit in f64 when the plain op is given the softmax the library computes (exp of the
 * max-subtracted logits over their sum), and any thread count gives the same bits. */
START_TEST(fused_equals_plain_on_softmaxed_weights) {
    kt_case *c = make_logits(0, 801);
    kt_round(c, MSDA_F64);
    results fused = alloc_results(c), plain = alloc_results(c), three = alloc_results(c);
    run_lib(c, MSDA_F64, MSDA_COORD_SAME, 1, &fused);
    run_lib(c, MSDA_F64, MSDA_COORD_SAME, 3, &three);
    double *logits = c->attn, *w = kt_alloc(c->n_attn);
    softmax_rows(c, logits, w);
    c->attn = w;
    c->weights = MSDA_WEIGHTS_SOFTMAXED;
    run_lib(c, MSDA_F64, MSDA_COORD_SAME, 1, &plain);
    c->attn = logits;
    ck_assert(memcmp(fused.out, plain.out, sizeof(double) * (size_t)c->n_out) == 0);
    ck_assert(memcmp(fused.gv, plain.gv, sizeof(double) * (size_t)c->n_value) == 0);
    ck_assert(memcmp(fused.gl, plain.gl, sizeof(double) * (size_t)(2 * c->n_attn)) == 0);
    ck_assert(memcmp(fused.out, three.out, sizeof(double) * (size_t)c->n_out) == 0);
    ck_assert(memcmp(fused.gx, three.gx, sizeof(double) * (size_t)c->n_attn) == 0);
    /* each row's logit gradients sum to zero (the softmax is invariant to a shift) */
    const int64_t LP = c->L * c->P;
    for (int64_t r = 0; r < c->n_attn / LP; r++) {
        double s = 0, a = 0;
        for (int64_t k = 0; k < LP; k++) s += fused.gx[r * LP + k], a += fabs(fused.gx[r * LP + k]);
        ck_assert_msg(fabs(s) <= 1e-12 * (1 + a), "row %lld: logit gradients sum to %g", (long long)r, s);
    }
    free(w);
    free_results(&fused), free_results(&plain), free_results(&three);
    kt_free(c);
}
END_TEST

/* The logits' gradient against central differences of the library's own fused forward (f64). */
START_TEST(logit_gradients_match_finite_differences) {
    kt_case *c = make_logits(2, (uint64_t)(900 + _i));
    double *gv = kt_alloc(c->n_value), *gl = kt_alloc(2 * c->n_attn), *gx = kt_alloc(c->n_attn);
    double *o = kt_alloc(c->n_out);
    kt_lib_backward_c(c, MSDA_F64, MSDA_COORD_SAME, 2, gv, gl, gx);
    int nonzero = 0;
    for (int64_t i = 0; i < c->n_attn; i++) {
        double side[2];
        const double eps = 1e-6, keep = c->attn[i];
        for (int k = 0; k < 2; k++) {
            c->attn[i] = keep + (k ? -eps : eps);
            kt_lib_forward_c(c, MSDA_F64, MSDA_COORD_SAME, 1, o);
            side[k] = 0;
            for (int64_t j = 0; j < c->n_out; j++) side[k] += o[j] * c->gout[j];
        }
        c->attn[i] = keep;
        const double fd = (side[0] - side[1]) / (2 * eps);
        ck_assert_msg(fabs(gx[i] - fd) <= 1e-6 + 1e-5 * fabs(fd), "logit %lld: analytic %.10g, finite differences %.10g",
                      (long long)i, gx[i], fd);
        nonzero += gx[i] != 0;
    }
    ck_assert_msg(nonzero > c->n_attn / 2, "too few nonzero logit gradients: %d", nonzero);
    free(gv), free(gl), free(gx), free(o);
    kt_free(c);
}
END_TEST

/* _i: which special row. Row 1 of the problem gets all -inf, a NaN, or a +inf among finite
 * logits: torch.softmax gives NaN for the whole row in each case, so the row's output (its points
 * are inside the maps) and its location and logit gradients are NaN; every other row is finite
 * and as the reference gives it; grad_value is NaN exactly where that row adds. A row with some
 * -inf (not all) is an ordinary row whose -inf points weigh 0. */
START_TEST(special_rows_behave_like_torch_softmax) {
    const int64_t hw[] = {4, 5, 2, 3};
    kt_case *c = kt_make(1, 3, 1, 4, 2, 2, hw, 0.0, 1000);
    const int64_t LP = 4, bad = 1;
    for (int64_t i = 0; i < 2 * c->n_attn; i++) c->loc[i] = 0.2 + 0.6 * (double)(i % 5) / 5; /* inside */
    c->attn[0] = -INFINITY; /* row 0: one -inf, an ordinary row */
    for (int64_t k = 0; k < LP; k++) {
        double *x = &c->attn[bad * LP + k];
        switch (_i) {
        case 0: *x = -INFINITY; break;
        case 1: *x = k == 2 ? NAN : *x; break;
        default: *x = k == 3 ? INFINITY : *x; break;
        }
    }
    c->weights = MSDA_WEIGHTS_LOGITS;
    const msda_dtype dtypes[] = {MSDA_F64, MSDA_F32, MSDA_F16, MSDA_BF16};
    for (size_t t = 0; t < 4; t++) {
        results lib = alloc_results(c);
        run_lib(c, dtypes[t], MSDA_COORD_SAME, 0, &lib);
        for (int64_t r = 0; r < 3; r++) {
            for (int64_t d = 0; d < c->D; d++)
                ck_assert_msg((r == bad) == isnan(lib.out[r * c->D + d]), "dtype %d: row %lld output %g",
                              (int)dtypes[t], (long long)r, lib.out[r * c->D + d]);
            for (int64_t k = 0; k < LP; k++) {
                ck_assert_msg((r == bad) == isnan(lib.gx[r * LP + k]), "dtype %d: row %lld logit gradient %g",
                              (int)dtypes[t], (long long)r, lib.gx[r * LP + k]);
                ck_assert((r == bad) == isnan(lib.gl[2 * (r * LP + k)]));
            }
        }
        ck_assert_msg(lib.gx[0] == 0.0, "a -inf logit's gradient is %g, not 0", lib.gx[0]);
        int nan_values = 0;
        for (int64_t i = 0; i < c->n_value; i++) nan_values += isnan(lib.gv[i]);
        ck_assert_msg(nan_values > 0 && nan_values < c->n_value, "dtype %d: %d NaN in grad_value",
                      (int)dtypes[t], nan_values);
        free_results(&lib);
    }
    /* the finite rows, in f64, against the reference on the same rows */
    results ref = alloc_results(c), lib = alloc_results(c);
    ref_logits(c, ref.out, ref.gv, ref.gl, ref.gx);
    run_lib(c, MSDA_F64, MSDA_COORD_SAME, 1, &lib);
    for (int64_t r = 0; r < 3; r += 2) {
        ck_assert(kt_rel_err(lib.out + r * c->D, ref.out + r * c->D, c->D) < 1e-12);
        ck_assert(kt_rel_err(lib.gx + r * LP, ref.gx + r * LP, LP) < 1e-12);
    }
    free_results(&ref), free_results(&lib);
    kt_free(c);
}
END_TEST

TCase *kt_tcase_softmax(void) {
    TCase *tc = tcase_create("fused softmax");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, logits_match_the_softmax_reference, 0, N_CONFIGS);
    tcase_add_test(tc, fused_equals_plain_on_softmaxed_weights);
    tcase_add_loop_test(tc, logit_gradients_match_finite_differences, 0, 2);
    tcase_add_loop_test(tc, special_rows_behave_like_torch_softmax, 0, 3);
    return tc;
}
