/* The CPU path against the f64 reference: forward and the three gradients, every dtype, with
 * border, outside and non-finite locations, odd D, L = 1, P = 1, several batch sizes. */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"
#include "msda_internal.h"

static const struct {
    const char *name;
    int64_t N, Lq, M, D, L, P;
    int64_t hw[2 * 4];
} configs[] = {
    {"4 levels, 4 points", 2, 7, 2, 8, 4, 4, {6, 7, 3, 4, 2, 2, 1, 1}},
    {"L=1, P=1", 1, 5, 1, 3, 1, 1, {5, 9}},
    {"D=5, N=3", 3, 4, 3, 5, 2, 3, {4, 4, 2, 3}},
    {"D=1", 2, 3, 2, 1, 3, 2, {3, 5, 1, 7, 2, 1}},
    {"D=71", 1, 3, 2, 71, 2, 2, {3, 3, 2, 2}},
    {"1x1 maps, N=4", 4, 4, 1, 4, 2, 2, {1, 1, 1, 1}},
};
#define N_CONFIGS (int)(sizeof configs / sizeof configs[0])

static const msda_dtype dtypes[] = {MSDA_F64, MSDA_F32, MSDA_F16, MSDA_BF16};

static double tolerance(msda_dtype dtype) {
    switch (dtype) {
    case MSDA_F64: return 1e-12;
    case MSDA_F32: return 1e-5;
    default: return 1e-2;
    }
}

static kt_case *make_config(int i, double special, msda_dtype dtype) {
    kt_case *c = kt_make(configs[i].N, configs[i].Lq, configs[i].M, configs[i].D, configs[i].L,
                         configs[i].P, configs[i].hw, special, (uint64_t)(100 + i));
    kt_round(c, dtype);
    return c;
}

static void check_all_finite(const double *x, int64_t n, const char *what, const char *cfg) {
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(isfinite(x[i]), "%s: %s[%lld] is %g", cfg, what, (long long)i, x[i]);
}

/* _i: the config; every dtype in turn. */
START_TEST(forward_matches_reference) {
    for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++) {
        kt_case *c = make_config(_i, 0.25, dtypes[t]);
        double *ref = kt_alloc(c->n_out), *out = kt_alloc(c->n_out);
        kt_ref_forward(c, ref);
        kt_lib_forward(c, dtypes[t], 0, out);
        check_all_finite(out, c->n_out, "output", configs[_i].name);
        const double e = kt_rel_err(out, ref, c->n_out);
        ck_assert_msg(e < tolerance(dtypes[t]), "%s dtype %d: forward relative error %g",
                      configs[_i].name, (int)dtypes[t], e);
        free(ref);
        free(out);
        kt_free(c);
    }
}
END_TEST

START_TEST(backward_matches_reference) {
    for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; t++) {
        kt_case *c = make_config(_i, 0.25, dtypes[t]);
        double *rv = kt_alloc(c->n_value), *rl = kt_alloc(2 * c->n_attn), *ra = kt_alloc(c->n_attn);
        double *gv = kt_alloc(c->n_value), *gl = kt_alloc(2 * c->n_attn), *ga = kt_alloc(c->n_attn);
        kt_ref_backward(c, rv, rl, ra);
        kt_lib_backward(c, dtypes[t], 0, gv, gl, ga);
        check_all_finite(gv, c->n_value, "grad_value", configs[_i].name);
        check_all_finite(gl, 2 * c->n_attn, "grad_sampling_locations", configs[_i].name);
        check_all_finite(ga, c->n_attn, "grad_attention_weights", configs[_i].name);
        const double ev = kt_rel_err(gv, rv, c->n_value), el = kt_rel_err(gl, rl, 2 * c->n_attn);
        const double ea = kt_rel_err(ga, ra, c->n_attn), tol = tolerance(dtypes[t]);
        ck_assert_msg(ev < tol && el < tol && ea < tol,
                      "%s dtype %d: relative errors value %g, locations %g, weights %g",
                      configs[_i].name, (int)dtypes[t], ev, el, ea);
        free(rv), free(rl), free(ra), free(gv), free(gl), free(ga);
        kt_free(c);
    }
}
END_TEST

/* Points outside the maps and non-finite ones contribute nothing: a problem whose locations
 * are all such gives an all-zero output and all-zero gradients. */
START_TEST(outside_and_nonfinite_contribute_zero) {
    const int64_t hw[] = {3, 4, 2, 2};
    kt_case *c = kt_make(2, 3, 2, 5, 2, 3, hw, 0.0, 7);
    const double bad[] = {NAN, INFINITY, -INFINITY, 1e30, -1e30, 5.0, -2.0};
    for (int64_t i = 0; i < 2 * c->n_attn; i++) c->loc[i] = bad[i % 7];
    double *out = kt_alloc(c->n_out);
    double *gv = kt_alloc(c->n_value), *gl = kt_alloc(2 * c->n_attn), *ga = kt_alloc(c->n_attn);
    kt_lib_forward(c, MSDA_F32, 0, out);
    kt_lib_backward(c, MSDA_F32, 0, gv, gl, ga);
    for (int64_t i = 0; i < c->n_out; i++) ck_assert_msg(out[i] == 0.0, "output[%lld] = %g", (long long)i, out[i]);
    for (int64_t i = 0; i < c->n_value; i++) ck_assert(gv[i] == 0.0);
    for (int64_t i = 0; i < 2 * c->n_attn; i++) ck_assert(gl[i] == 0.0);
    for (int64_t i = 0; i < c->n_attn; i++) ck_assert(ga[i] == 0.0);
    free(out), free(gv), free(gl), free(ga);
    kt_free(c);
}
END_TEST

/* A location exactly on a pixel centre samples that pixel alone. */
START_TEST(pixel_centre_samples_the_pixel) {
    const int64_t hw[] = {4, 6};
    kt_case *c = kt_make(1, 1, 1, 2, 1, 1, hw, 0.0, 9);
    c->attn[0] = 1.0;
    c->loc[0] = (3 + 0.5) / 6.0; /* x: column 3 */
    c->loc[1] = (2 + 0.5) / 4.0; /* y: row 2 */
    double out[2];
    kt_lib_forward(c, MSDA_F64, 1, out);
    for (int d = 0; d < 2; d++) ck_assert_double_eq_tol(out[d], c->value[(2 * 6 + 3) * 2 + d], 1e-12);
    kt_free(c);
}
END_TEST

/* The result does not depend on the thread count: bit for bit. */
START_TEST(threads_do_not_change_results) {
    kt_case *c = make_config(0, 0.1, MSDA_F32);
    double *o1 = kt_alloc(c->n_out), *o3 = kt_alloc(c->n_out);
    double *v1 = kt_alloc(c->n_value), *v3 = kt_alloc(c->n_value);
    double *l1 = kt_alloc(2 * c->n_attn), *l3 = kt_alloc(2 * c->n_attn);
    double *a1 = kt_alloc(c->n_attn), *a3 = kt_alloc(c->n_attn);
    kt_lib_forward(c, MSDA_F32, 1, o1);
    kt_lib_forward(c, MSDA_F32, 3, o3);
    kt_lib_backward(c, MSDA_F32, 1, v1, l1, a1);
    kt_lib_backward(c, MSDA_F32, 3, v3, l3, a3);
    ck_assert(memcmp(o1, o3, sizeof(double) * (size_t)c->n_out) == 0);
    ck_assert(memcmp(v1, v3, sizeof(double) * (size_t)c->n_value) == 0);
    ck_assert(memcmp(l1, l3, sizeof(double) * (size_t)(2 * c->n_attn)) == 0);
    ck_assert(memcmp(a1, a3, sizeof(double) * (size_t)c->n_attn) == 0);
    free(o1), free(o3), free(v1), free(v3), free(l1), free(l3), free(a1), free(a3);
    kt_free(c);
}
END_TEST

/* Mixed precision (f16/bf16 value, f32 locations and weights), _i the config: against the f64
 * reference on the same inputs. The output and grad_value carry the 16-bit rounding of their
 * results; the location and weight gradients are f32 and far closer than 16-bit ones could
 * be (their inputs are not rounded to 16 bits, nor are they). */
START_TEST(mixed_precision_matches_reference) {
    const msda_dtype halves[] = {MSDA_F16, MSDA_BF16};
    for (size_t t = 0; t < 2; t++) {
        kt_case *c = kt_make(configs[_i].N, configs[_i].Lq, configs[_i].M, configs[_i].D, configs[_i].L,
                             configs[_i].P, configs[_i].hw, 0.25, (uint64_t)(300 + _i));
        kt_round_mixed(c, halves[t]);
        double *ref = kt_alloc(c->n_out), *out = kt_alloc(c->n_out);
        double *rv = kt_alloc(c->n_value), *rl = kt_alloc(2 * c->n_attn), *ra = kt_alloc(c->n_attn);
        double *gv = kt_alloc(c->n_value), *gl = kt_alloc(2 * c->n_attn), *ga = kt_alloc(c->n_attn);
        kt_ref_forward(c, ref);
        kt_ref_backward(c, rv, rl, ra);
        kt_lib_forward_c(c, halves[t], MSDA_COORD_F32, 0, out);
        kt_lib_backward_c(c, halves[t], MSDA_COORD_F32, 0, gv, gl, ga);
        const double eo = kt_rel_err(out, ref, c->n_out), ev = kt_rel_err(gv, rv, c->n_value);
        const double el = kt_rel_err(gl, rl, 2 * c->n_attn), ea = kt_rel_err(ga, ra, c->n_attn);
        ck_assert_msg(eo < 1e-2 && ev < 1e-2 && el < 1e-4 && ea < 1e-4,
                      "%s dtype %d, f32 coordinates: relative errors output %g, value %g, locations %g, "
                      "weights %g",
                      configs[_i].name, (int)halves[t], eo, ev, el, ea);
        free(ref), free(out), free(rv), free(rl), free(ra), free(gv), free(gl), free(ga);
        kt_free(c);
    }
}
END_TEST

/* f32 locations are used as they are: a location between two f16 values samples elsewhere than
 * its f16 rounding does. */
/* threads = 0: a thread for each CPU the process may run on, not for each online CPU (under
 * taskset, a container's cpuset or a batch scheduler's, far fewer). */
START_TEST(zero_threads_means_the_cpus_the_process_may_run_on) {
    cpu_set_t all, one;
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    ck_assert_int_eq(msda_cpu_default_threads(), CPU_COUNT(&all));
    int first = 0;
    while (!CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
    ck_assert_int_eq(msda_cpu_default_threads(), 1);
    ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
}
END_TEST

START_TEST(mixed_precision_keeps_f32_locations) {
    const int64_t hw[] = {1, 2048};
    kt_case *c = kt_make(1, 1, 1, 1, 1, 1, hw, 0.0, 11);
    for (int64_t i = 0; i < c->n_value; i++) c->value[i] = (double)(i - 100); /* sample: w - 100 */
    c->attn[0] = 1.0;
    c->loc[0] = 0.050012; /* f16 rounds it to 0.0500183 (spacing 2^-15): 0.013 pixels further */
    c->loc[1] = 0.5;
    double mixed, same;
    kt_lib_forward_c(c, MSDA_F16, MSDA_COORD_F32, 1, &mixed);
    kt_lib_forward_c(c, MSDA_F16, MSDA_COORD_SAME, 1, &same);
    const double want = (double)((float)c->loc[0] * 2048.0f - 0.5f) - 100.0; /* 1.9246 */
    ck_assert_msg(fabs(mixed - want) < 2e-3, "f32 coordinates: %.5f, expected %.5f", mixed, want);
    ck_assert_msg(fabs(same - want) > 1e-2, "f16 coordinates: %.5f, expected their rounding", same);
    kt_free(c);
}
END_TEST

TCase *kt_tcase_cpu(void) {
    TCase *tc = tcase_create("cpu path");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, forward_matches_reference, 0, N_CONFIGS);
    tcase_add_loop_test(tc, backward_matches_reference, 0, N_CONFIGS);
    tcase_add_test(tc, outside_and_nonfinite_contribute_zero);
    tcase_add_test(tc, pixel_centre_samples_the_pixel);
    tcase_add_test(tc, threads_do_not_change_results);
    tcase_add_loop_test(tc, mixed_precision_matches_reference, 0, N_CONFIGS);
    tcase_add_test(tc, mixed_precision_keeps_f32_locations);
    tcase_add_test(tc, zero_threads_means_the_cpus_the_process_may_run_on);
    return tc;
}
