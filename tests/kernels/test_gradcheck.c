/* The CPU path's gradients against central finite differences of its own forward (f64), for a
 * loss sum(output * grad_output): every location and weight, and a sample of value entries. */
#include <math.h>
#include <stdlib.h>

#include "kt.h"

static double loss(const kt_case *c, double *out) {
    kt_lib_forward(c, MSDA_F64, 1, out);
    double s = 0;
    for (int64_t i = 0; i < c->n_out; i++) s += out[i] * c->gout[i];
    return s;
}

/* d loss / d x[i] by central differences, x being one of c's input arrays. */
static double numeric(kt_case *c, double *x, int64_t i, double *scratch) {
    const double eps = 1e-6, keep = x[i];
    x[i] = keep + eps;
    const double up = loss(c, scratch);
    x[i] = keep - eps;
    const double down = loss(c, scratch);
    x[i] = keep;
    return (up - down) / (2 * eps);
}

static void expect_close(double analytic, double fd, const char *what, int64_t i) {
    ck_assert_msg(fabs(analytic - fd) <= 1e-6 + 1e-5 * fabs(fd),
                  "%s[%lld]: analytic %.10g, finite differences %.10g", what, (long long)i, analytic, fd);
}

/* _i: the seed. Locations away from the borders' kinks are what random draws give; the few
 * outside the maps check that both sides agree on zero. */
START_TEST(gradients_match_finite_differences) {
    const int64_t hw[] = {4, 5, 2, 3};
    kt_case *c = kt_make(2, 3, 2, 3, 2, 2, hw, 0.0, (uint64_t)(500 + _i));
    double *gv = kt_alloc(c->n_value), *gl = kt_alloc(2 * c->n_attn), *ga = kt_alloc(c->n_attn);
    double *scratch = kt_alloc(c->n_out);
    kt_lib_backward(c, MSDA_F64, 2, gv, gl, ga);
    int nonzero = 0;
    for (int64_t i = 0; i < 2 * c->n_attn; i++) {
        expect_close(gl[i], numeric(c, c->loc, i, scratch), "grad_sampling_locations", i);
        nonzero += gl[i] != 0;
    }
    for (int64_t i = 0; i < c->n_attn; i++) expect_close(ga[i], numeric(c, c->attn, i, scratch), "grad_attention_weights", i);
    for (int64_t k = 0; k < 60; k++) {
        const int64_t i = (k * 7919) % c->n_value;
        expect_close(gv[i], numeric(c, c->value, i, scratch), "grad_value", i);
    }
    ck_assert_msg(nonzero > c->n_attn, "too few points inside the maps to test: %d", nonzero);
    free(gv), free(gl), free(ga), free(scratch);
    kt_free(c);
}
END_TEST

TCase *kt_tcase_gradcheck(void) {
    TCase *tc = tcase_create("finite differences");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, gradients_match_finite_differences, 0, 3);
    return tc;
}
