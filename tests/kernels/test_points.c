/* ABI 5 on the CPU path: a point count per level (msda.h, level_points) and discrete sampling
 * (MSDA_SAMPLING_DISCRETE). The library against a plain f64 reference written here from msda.h's
 * formulas (kt_ref.c indexes every level with the same P, so it cannot serve), every dtype and
 * mixed precision, softmaxed weights and logits; a per-level problem against the same problem
 * padded to P points on every level with weights of zero; discrete sampling's edges, clamps and
 * non-finite locations; thread counts; and the checks of level_points and sampling. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt.h"

/* One problem with f64 master copies of every input, its levels holding counts[l] points. */
typedef struct pt_case {
    int64_t N, S, M, D, Lq, L, P; /* P: the largest count, what sizes.points must be */
    int64_t shapes[2 * MSDA_MAX_LEVELS], starts[MSDA_MAX_LEVELS];
    int64_t counts[MSDA_MAX_LEVELS]; /* each level's points */
    int64_t first[MSDA_MAX_LEVELS];  /* each level's first point within a group */
    int64_t LP;                      /* a group's points: the sum of counts */
    double *value, *loc, *attn, *gout;
    int64_t n_value, n_out, n_attn; /* element counts; locations: 2 * n_attn */
    int f32_steps; /* the library computes a location's steps in f32 (f32, f16, bf16 values): so
                      does the reference, so that both take the same pixels at their edges */
    msda_weights weights;   /* what the calls pass; the reference softmaxes logits itself */
    msda_sampling sampling;
    int pass_counts; /* the calls pass counts as level_points (else NULL: P on every level) */
} pt_case;

/* Special coordinates, in units of a level of n pixels: the map's borders, bilinear's limits
 * (h = -1, h = n) and just inside them, pixel centres, which are discrete sampling's edges
 * (v * n + 0.5 an integer), far outside, NaN and both infinities. */
static double special_coord(uint64_t *s, int64_t size) {
    const double n = (double)size;
    switch (kt_rand_u64(s) % 12) {
    case 0: return 0.0;
    case 1: return 1.0;
    case 2: return -0.49 / n;
    case 3: return -0.5 / n;
    case 4: return (n + 0.49) / n;
    case 5: return (n + 0.5) / n;
    case 6: return ((double)(kt_rand_u64(s) % (uint64_t)(size + 1)) + 0.5) / n; /* an edge */
    case 7: return 7.5;
    case 8: return -3.0;
    case 9: return NAN;
    case 10: return INFINITY;
    default: return -INFINITY;
    }
}

static pt_case *pt_make(int64_t N, int64_t Lq, int64_t M, int64_t D, int64_t L, const int64_t *counts,
                        const int64_t *hw, double special, uint64_t seed) {
    pt_case *c = calloc(1, sizeof *c);
    ck_assert_ptr_nonnull(c);
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    c->N = N, c->Lq = Lq, c->M = M, c->D = D, c->L = L;
    c->pass_counts = 1;
    for (int64_t l = 0; l < L; l++) {
        c->shapes[2 * l] = hw[2 * l];
        c->shapes[2 * l + 1] = hw[2 * l + 1];
        c->starts[l] = c->S;
        c->S += hw[2 * l] * hw[2 * l + 1];
        c->counts[l] = counts[l];
        c->first[l] = c->LP;
        c->LP += counts[l];
        if (counts[l] > c->P) c->P = counts[l];
    }
    c->n_value = N * c->S * M * D;
    c->n_out = N * Lq * M * D;
    c->n_attn = N * Lq * M * c->LP;
    c->value = kt_alloc(c->n_value);
    c->gout = kt_alloc(c->n_out);
    c->attn = kt_alloc(c->n_attn);
    c->loc = kt_alloc(2 * c->n_attn);
    for (int64_t i = 0; i < c->n_value; i++) c->value[i] = 2 * kt_rand_unit(&s) - 1;
    for (int64_t i = 0; i < c->n_out; i++) c->gout[i] = 2 * kt_rand_unit(&s) - 1;
    for (int64_t i = 0; i < c->n_attn; i++) {
        int64_t l = 0;
        while (l + 1 < L && i % c->LP >= c->first[l + 1]) l++;
        c->attn[i] = kt_rand_unit(&s);
        for (int k = 0; k < 2; k++) {
            const int64_t size = c->shapes[2 * l + 1 - k]; /* x scales by W, y by H */
            c->loc[2 * i + k] = kt_rand_unit(&s) < special ? special_coord(&s, size) : 1.2 * kt_rand_unit(&s) - 0.1;
        }
    }
    return c;
}

static void pt_free(pt_case *c) {
    if (!c) return;
    free(c->value), free(c->gout), free(c->attn), free(c->loc);
    free(c);
}

/* x rounded to dtype in place, through the library's own conversions. */
static void round_array(double *x, int64_t n, msda_dtype dtype) {
    void *p = kt_to_dtype(x, n, dtype);
    kt_from_dtype(p, n, dtype, x);
    free(p);
}

/* Every input rounded to dtype (the reference then sees what the library sees). */
static void pt_round(pt_case *c, msda_dtype dtype) {
    c->f32_steps = dtype != MSDA_F64;
    round_array(c->value, c->n_value, dtype);
    round_array(c->gout, c->n_out, dtype);
    round_array(c->attn, c->n_attn, dtype);
    round_array(c->loc, 2 * c->n_attn, dtype);
}

/* Mixed precision: value and grad_output in dtype, locations and weights in f32. */
static void pt_round_mixed(pt_case *c, msda_dtype dtype) {
    c->f32_steps = 1;
    round_array(c->value, c->n_value, dtype);
    round_array(c->gout, c->n_out, dtype);
    round_array(c->attn, c->n_attn, MSDA_F32);
    round_array(c->loc, 2 * c->n_attn, MSDA_F32);
}

/* ---- the reference ---------------------------------------------------------------------------- */

/* What one point reads: up to four pixels, each with its coefficient in the sample and the
 * coefficient's derivatives with respect to the location's x and y. */
typedef struct {
    int taps; /* 0: the point contributes nothing */
    int64_t y[4], x[4];
    double coef[4], dcoef_dx[4], dcoef_dy[4];
} taps;

/* Discrete sampling's pixel in a dimension of n (msda.h): trunc(v * n + 0.5), the product and the
 * sum each rounded in the accumulation type, clamped to [0, n - 1] (infinities to the edges). */
static int64_t discrete_pixel(double v, int64_t n, int f32_steps) {
    const double f = f32_steps ? (double)((float)v * (float)n + 0.5f) : v * (double)n + 0.5;
    return (int64_t)fmin(fmax(trunc(f), 0.0), (double)(n - 1));
}

static taps point_taps(const pt_case *c, int64_t l, double x, double y) {
    const int64_t Hn = c->shapes[2 * l], Wn = c->shapes[2 * l + 1];
    taps t = {0};
    if (c->sampling == MSDA_SAMPLING_DISCRETE) {
        if (isnan(x) || isnan(y)) return t;
        t.taps = 1;
        t.y[0] = discrete_pixel(y, Hn, c->f32_steps);
        t.x[0] = discrete_pixel(x, Wn, c->f32_steps);
        t.coef[0] = 1; /* constant between edges: no derivative */
        return t;
    }
    const double H = (double)Hn, W = (double)Wn;
    double h = y * H - 0.5, w = x * W - 0.5;
    if (c->f32_steps) {
        h = (double)((float)y * (float)H - 0.5f);
        w = (double)((float)x * (float)W - 0.5f);
    }
    if (!isfinite(h) || !isfinite(w) || h <= -1.0 || w <= -1.0 || h >= H || w >= W) return t;
    const double y0 = floor(h), x0 = floor(w), fy = h - y0, fx = w - x0;
    t.taps = 4;
    for (int j = 0; j < 4; j++) {
        const int dy = j >> 1, dx = j & 1;
        const double cy = dy ? fy : 1 - fy, cx = dx ? fx : 1 - fx;
        t.y[j] = (int64_t)y0 + dy;
        t.x[j] = (int64_t)x0 + dx;
        t.coef[j] = cy * cx;
        t.dcoef_dx[j] = cy * (dx ? W : -W); /* d fx / d x = W */
        t.dcoef_dy[j] = cx * (dy ? H : -H);
    }
    return t;
}

/* The index of value[n, start_l + y*W + x, m, 0], or -1 for a pixel outside the level. */
static int64_t pixel_at(const pt_case *c, int64_t n, int64_t m, int64_t l, int64_t y, int64_t x) {
    const int64_t H = c->shapes[2 * l], W = c->shapes[2 * l + 1];
    if (y < 0 || x < 0 || y >= H || x >= W) return -1;
    return ((n * c->S + c->starts[l] + y * W + x) * c->M + m) * c->D;
}

/* The weights the formula uses: attn itself, or with logits a softmax over each group's LP. */
static void reference_weights(const pt_case *c, double *w) {
    if (c->weights == MSDA_WEIGHTS_SOFTMAXED) {
        memcpy(w, c->attn, sizeof(double) * (size_t)c->n_attn);
        return;
    }
    for (int64_t g = 0; g < c->n_attn / c->LP; g++) {
        const double *x = c->attn + g * c->LP;
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < c->LP; k++) mx = fmax(mx, x[k]);
        for (int64_t k = 0; k < c->LP; k++) sum += exp(x[k] - mx);
        for (int64_t k = 0; k < c->LP; k++) w[g * c->LP + k] = exp(x[k] - mx) / sum;
    }
}

typedef struct {
    double *out, *gv, *gl, *ga; /* output and the three gradients (ga: of the weights or logits) */
} results;

static results alloc_results(const pt_case *c) {
    return (results){kt_alloc(c->n_out), kt_alloc(c->n_value), kt_alloc(2 * c->n_attn), kt_alloc(c->n_attn)};
}

static void free_results(results *r) { free(r->out), free(r->gv), free(r->gl), free(r->ga); }

/* The forward and the three gradients, a point at a time, level by level. */
static void reference(const pt_case *c, results *r) {
    double *w = kt_alloc(c->n_attn), *gw = kt_alloc(c->n_attn);
    reference_weights(c, w);
    memset(r->out, 0, sizeof(double) * (size_t)c->n_out);
    memset(r->gv, 0, sizeof(double) * (size_t)c->n_value);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t q = 0; q < c->Lq; q++)
            for (int64_t m = 0; m < c->M; m++) {
                const int64_t g = (n * c->Lq + q) * c->M + m;
                double *out = r->out + g * c->D;
                const double *go = c->gout + g * c->D;
                for (int64_t l = 0; l < c->L; l++)
                    for (int64_t p = 0; p < c->counts[l]; p++) {
                        const int64_t i = g * c->LP + c->first[l] + p;
                        const taps t = point_taps(c, l, c->loc[2 * i], c->loc[2 * i + 1]);
                        double d_w = 0, d_x = 0, d_y = 0;
                        for (int j = 0; j < t.taps; j++) {
                            const int64_t at = pixel_at(c, n, m, l, t.y[j], t.x[j]);
                            if (at < 0) continue; /* zero padding */
                            for (int64_t d = 0; d < c->D; d++) {
                                const double v = c->value[at + d];
                                out[d] += w[i] * t.coef[j] * v;
                                d_w += go[d] * t.coef[j] * v;
                                d_x += go[d] * t.dcoef_dx[j] * v;
                                d_y += go[d] * t.dcoef_dy[j] * v;
                                r->gv[at + d] += go[d] * w[i] * t.coef[j];
                            }
                        }
                        gw[i] = d_w;
                        r->gl[2 * i] = w[i] * d_x;
                        r->gl[2 * i + 1] = w[i] * d_y;
                    }
                /* Logits: the softmax's Jacobian, sum_k g_k * w_k * ([k == j] - w_j). */
                for (int64_t j = 0; j < c->LP; j++) {
                    const int64_t i = g * c->LP + j;
                    if (c->weights == MSDA_WEIGHTS_SOFTMAXED) {
                        r->ga[i] = gw[i];
                        continue;
                    }
                    double s = 0;
                    for (int64_t k = 0; k < c->LP; k++) {
                        const int64_t ik = g * c->LP + k;
                        s += gw[ik] * w[ik] * ((k == j) - w[i]);
                    }
                    r->ga[i] = s;
                }
            }
    free(w), free(gw);
}

/* ---- the library --------------------------------------------------------------------------------- */

/* Filled with all bits set (NaN in every dtype), so that an element left unwritten fails. */
static void *poisoned(int64_t n, msda_dtype dtype) {
    const size_t bytes = (size_t)n * (dtype == MSDA_F64 ? 8 : dtype == MSDA_F32 ? 4 : 2);
    void *p = malloc(bytes ? bytes : 1);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xff, bytes);
    return p;
}

/* c's level_points as the library gets them: a heap array of exactly L entries (AddressSanitizer
 * then catches a read past them), or NULL. */
static int64_t *level_points_of(const pt_case *c) {
    if (!c->pass_counts) return NULL;
    int64_t *p = malloc(sizeof(int64_t) * (size_t)c->L);
    ck_assert_ptr_nonnull(p);
    memcpy(p, c->counts, sizeof(int64_t) * (size_t)c->L);
    return p;
}

/* The forward and the backward on the CPU path in dtype (locations and weights in the type
 * coord gives), results converted to f64. */
static void lib_run(const pt_case *c, msda_dtype dtype, msda_coord_type coord, int threads, results *r) {
    const msda_dtype ct = coord == MSDA_COORD_F32 ? MSDA_F32 : dtype;
    int64_t *counts = level_points_of(c);
    void *value = kt_to_dtype(c->value, c->n_value, dtype), *gout = kt_to_dtype(c->gout, c->n_out, dtype);
    void *loc = kt_to_dtype(c->loc, 2 * c->n_attn, ct), *attn = kt_to_dtype(c->attn, c->n_attn, ct);
    void *out = poisoned(c->n_out, dtype), *gv = poisoned(c->n_value, dtype);
    void *gl = poisoned(2 * c->n_attn, ct), *ga = poisoned(c->n_attn, ct);
    const msda_sizes sizes = {c->N, c->S, c->M, c->D, c->Lq, c->L, c->P};
    const msda_forward_args f = {.dtype = dtype, .coord_type = coord, .weights = c->weights, .sizes = sizes,
                                 .spatial_shapes = c->shapes, .level_start = c->starts, .value = value,
                                 .sampling_locations = loc, .attention_weights = attn, .output = out,
                                 .level_points = counts, .sampling = c->sampling};
    const msda_backward_args b = {.dtype = dtype, .coord_type = coord, .weights = c->weights, .sizes = sizes,
                                  .spatial_shapes = c->shapes, .level_start = c->starts, .value = value,
                                  .sampling_locations = loc, .attention_weights = attn, .grad_output = gout,
                                  .grad_value = gv, .grad_sampling_locations = gl, .grad_attention_weights = ga,
                                  .level_points = counts, .sampling = c->sampling};
    msda_error err;
    msda_status st = msda_forward_cpu(&f, threads, &err);
    ck_assert_msg(st == MSDA_OK, "msda_forward_cpu: %s", err.message);
    st = msda_backward_cpu(&b, threads, &err);
    ck_assert_msg(st == MSDA_OK, "msda_backward_cpu: %s", err.message);
    kt_from_dtype(out, c->n_out, dtype, r->out);
    kt_from_dtype(gv, c->n_value, dtype, r->gv);
    kt_from_dtype(gl, 2 * c->n_attn, ct, r->gl);
    kt_from_dtype(ga, c->n_attn, ct, r->ga);
    free(counts), free(value), free(gout), free(loc), free(attn), free(out), free(gv), free(gl), free(ga);
}

static void check_all_finite(const double *x, int64_t n, const char *what, const char *ctx) {
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(isfinite(x[i]), "%s: %s[%lld] is %g", ctx, what, (long long)i, x[i]);
}

/* Discrete sampling: every location gradient exactly zero, inside the map or not. */
static void check_location_gradients_zero(const pt_case *c, const double *gl, const char *ctx) {
    if (c->sampling != MSDA_SAMPLING_DISCRETE) return;
    for (int64_t i = 0; i < 2 * c->n_attn; i++)
        ck_assert_msg(gl[i] == 0.0, "%s: grad_sampling_locations[%lld] is %g under discrete sampling", ctx,
                      (long long)i, gl[i]);
}

/* ---- the problems ---------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int64_t N, Lq, M, D, L;
    int64_t counts[4];
    int64_t hw[2 * 4];
} configs[] = {
    {"points 3,6,3", 2, 5, 2, 8, 3, {3, 6, 3}, {6, 7, 3, 4, 2, 5}},
    {"points 1,2,3,4", 2, 4, 2, 4, 4, {1, 2, 3, 4}, {6, 7, 3, 4, 2, 2, 1, 1}},
    {"points 4,4,4 passed", 1, 6, 3, 5, 3, {4, 4, 4}, {5, 5, 3, 3, 2, 2}},
    {"points 5,1, D=3, N=3", 3, 3, 1, 3, 2, {5, 1}, {4, 6, 1, 3}},
    {"points 2,7, D=1, 1x1 level", 2, 3, 2, 1, 2, {2, 7}, {1, 1, 3, 5}},
};
#define N_CONFIGS (int)(sizeof configs / sizeof configs[0])

static pt_case *make_config(int i, double special, uint64_t seed) {
    return pt_make(configs[i].N, configs[i].Lq, configs[i].M, configs[i].D, configs[i].L, configs[i].counts,
                   configs[i].hw, special, seed);
}

/* Each dtype, and f16 and bf16 beside f32 coordinates, with the plain op's tolerances. */
static const kt_dtype_run *const runs = kt_dtype_runs;
#define N_RUNS KT_DTYPE_RUNS

static const char *const sampling_names[] = {"bilinear", "discrete"};

/* The library against the reference on c, for every run. */
static void check_every_run(int config, msda_weights weights, msda_sampling sampling, uint64_t seed) {
    for (size_t t = 0; t < N_RUNS; t++) {
        pt_case *c = make_config(config, 0.25, seed);
        c->weights = weights;
        c->sampling = sampling;
        if (weights == MSDA_WEIGHTS_LOGITS)
            for (int64_t k = 0; k < c->n_attn; k++) c->attn[k] = 8 * c->attn[k] - 4; /* far from uniform */
        if (runs[t].coord == MSDA_COORD_F32)
            pt_round_mixed(c, runs[t].dtype);
        else
            pt_round(c, runs[t].dtype);
        char ctx[160];
        snprintf(ctx, sizeof ctx, "%s, %s, %s, dtype %d coord %d", configs[config].name, sampling_names[sampling],
                 weights == MSDA_WEIGHTS_LOGITS ? "logits" : "weights", (int)runs[t].dtype, (int)runs[t].coord);
        results ref = alloc_results(c), lib = alloc_results(c);
        reference(c, &ref);
        lib_run(c, runs[t].dtype, runs[t].coord, 0, &lib);
        check_all_finite(lib.out, c->n_out, "output", ctx);
        check_all_finite(lib.gv, c->n_value, "grad_value", ctx);
        check_all_finite(lib.gl, 2 * c->n_attn, "grad_sampling_locations", ctx);
        check_all_finite(lib.ga, c->n_attn, "grad_attention_weights", ctx);
        check_location_gradients_zero(c, lib.gl, ctx);
        const double eo = kt_rel_err(lib.out, ref.out, c->n_out), ev = kt_rel_err(lib.gv, ref.gv, c->n_value);
        const double el = kt_rel_err(lib.gl, ref.gl, 2 * c->n_attn), ea = kt_rel_err(lib.ga, ref.ga, c->n_attn);
        ck_assert_msg(eo < runs[t].tol_out && ev < runs[t].tol_out && el < runs[t].tol_coord && ea < runs[t].tol_coord,
                      "%s: relative errors output %g, value %g, locations %g, weights %g", ctx, eo, ev, el, ea);
        free_results(&ref), free_results(&lib);
        pt_free(c);
    }
}

/* _i: the config; bilinear and discrete sampling, attention weights as given. */
START_TEST(per_level_counts_match_the_reference) {
    check_every_run(_i, MSDA_WEIGHTS_SOFTMAXED, MSDA_SAMPLING_BILINEAR, (uint64_t)(1100 + _i));
    check_every_run(_i, MSDA_WEIGHTS_SOFTMAXED, MSDA_SAMPLING_DISCRETE, (uint64_t)(1200 + _i));
}
END_TEST

/* _i: the config; the fused softmax over each group's sum of P_l logits, both samplings. */
START_TEST(per_level_logits_match_the_reference) {
    check_every_run(_i, MSDA_WEIGHTS_LOGITS, MSDA_SAMPLING_BILINEAR, (uint64_t)(1300 + _i));
    check_every_run(_i, MSDA_WEIGHTS_LOGITS, MSDA_SAMPLING_DISCRETE, (uint64_t)(1400 + _i));
}
END_TEST

/* The per-level problem c as a uniform one of P points a level: each level's points first, then
 * padding of weight zero (logits: -inf, a softmax weight of exactly zero) at (0.5, 0.5), inside
 * every map. */
static pt_case *padded_to_uniform(const pt_case *c) {
    int64_t counts[MSDA_MAX_LEVELS];
    for (int64_t l = 0; l < c->L; l++) counts[l] = c->P;
    pt_case *u = pt_make(c->N, c->Lq, c->M, c->D, c->L, counts, c->shapes, 0.0, 1);
    u->weights = c->weights, u->sampling = c->sampling, u->f32_steps = c->f32_steps;
    memcpy(u->value, c->value, sizeof(double) * (size_t)c->n_value);
    memcpy(u->gout, c->gout, sizeof(double) * (size_t)c->n_out);
    const double padding = c->weights == MSDA_WEIGHTS_LOGITS ? -INFINITY : 0.0;
    for (int64_t g = 0; g < c->n_attn / c->LP; g++)
        for (int64_t l = 0; l < c->L; l++)
            for (int64_t p = 0; p < c->P; p++) {
                const int64_t iu = g * u->LP + l * c->P + p, ic = g * c->LP + c->first[l] + p;
                const int real = p < c->counts[l];
                u->attn[iu] = real ? c->attn[ic] : padding;
                u->loc[2 * iu] = real ? c->loc[2 * ic] : 0.5;
                u->loc[2 * iu + 1] = real ? c->loc[2 * ic + 1] : 0.5;
            }
    return u;
}

static void expect_same(const double *a, const double *b, int64_t n, const char *what, const char *ctx) {
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(a[i] == b[i], "%s: %s[%lld] is %.17g per level, %.17g padded", ctx, what, (long long)i, a[i],
                      b[i]);
}

/* _i: the config. In f64, the per-level problem gives what the uniform one padded to P points
 * with weights of zero gives: the output, grad_value, and each real point's location and weight
 * gradients (the padding adds nothing, and its location gradients are zero). Both samplings,
 * weights and logits. */
START_TEST(per_level_equals_padding_with_zero_weights) {
    for (int mode = 0; mode < 4; mode++) {
        pt_case *c = make_config(_i, 0.25, (uint64_t)(1500 + _i));
        c->sampling = mode & 1 ? MSDA_SAMPLING_DISCRETE : MSDA_SAMPLING_BILINEAR;
        c->weights = mode & 2 ? MSDA_WEIGHTS_LOGITS : MSDA_WEIGHTS_SOFTMAXED;
        pt_case *u = padded_to_uniform(c);
        u->pass_counts = 0;
        char ctx[128];
        snprintf(ctx, sizeof ctx, "%s, %s, %s", configs[_i].name, sampling_names[c->sampling],
                 mode & 2 ? "logits" : "weights");
        results per_level = alloc_results(c), padded = alloc_results(u);
        lib_run(c, MSDA_F64, MSDA_COORD_SAME, 0, &per_level);
        lib_run(u, MSDA_F64, MSDA_COORD_SAME, 0, &padded);
        expect_same(per_level.out, padded.out, c->n_out, "output", ctx);
        expect_same(per_level.gv, padded.gv, c->n_value, "grad_value", ctx);
        for (int64_t g = 0; g < c->n_attn / c->LP; g++)
            for (int64_t l = 0; l < c->L; l++)
                for (int64_t p = 0; p < c->P; p++) {
                    const int64_t iu = g * u->LP + l * c->P + p, ic = g * c->LP + c->first[l] + p;
                    if (p >= c->counts[l]) {
                        ck_assert_msg(padded.gl[2 * iu] == 0.0 && padded.gl[2 * iu + 1] == 0.0,
                                      "%s: padding point %lld has location gradient (%g, %g)", ctx, (long long)iu,
                                      padded.gl[2 * iu], padded.gl[2 * iu + 1]);
                        continue;
                    }
                    expect_same(per_level.gl + 2 * ic, padded.gl + 2 * iu, 2, "grad_sampling_locations", ctx);
                    expect_same(per_level.ga + ic, padded.ga + iu, 1, "grad_attention_weights", ctx);
                }
        free_results(&per_level), free_results(&padded);
        pt_free(u);
        pt_free(c);
    }
}
END_TEST

/* ---- discrete sampling's edges ------------------------------------------------------------------ */

/* One level of H = 3, W = 4; one point a query of weight 1; the pixel each location takes. All the
 * coordinates are exact in bf16 and f16, so that every dtype sees these very locations. */
static const struct {
    double x, y;
    int64_t ix, iy; /* -1: a NaN location, which contributes nothing */
} discrete_points[] = {
    {0.0, 0.0, 0, 0},                /* f = 0.5 */
    {1.0, 1.0, 3, 2},                /* f = W + 0.5, H + 0.5: the last pixel */
    {0.125, 0.5, 1, 2},              /* f = 1.0 and 2.0: an edge belongs to the pixel above it */
    {0.375, 0.25, 2, 1},             /* f = 2.0 (edge); y: 1.25 */
    {0.625, 0.0625, 3, 0},           /* f = 3.0 (edge); y: 0.6875 */
    {0.875, 0.8125, 3, 2},           /* f = 4.0 = W: clamped; y: 2.9375 */
    {0.1240234375, 0.09375, 0, 0},   /* f = 0.99609375, just under an edge; y: 0.78125 */
    {0.373046875, 0.49609375, 1, 1}, /* f = 1.9921875; y: 1.98828125 */
    {-0.125, -0.1875, 0, 0},         /* f = 0 and -0.0625 */
    {-0.1875, 0.6666, 0, 2},         /* f = -0.25: trunc gives -0, the first pixel */
    {-3.0, -1000.0, 0, 0},           /* far before the map */
    {1.25, 7.5, 3, 2},               /* past the map */
    {1000.0, 0.5, 3, 2},
    {INFINITY, -INFINITY, 3, 0},     /* infinities: clamped to the edges */
    {-INFINITY, INFINITY, 0, 2},
    {NAN, 0.5, -1, -1},              /* NaN: nothing, zero gradients */
    {0.5, NAN, -1, -1},
    {NAN, NAN, -1, -1},
};
#define N_DISCRETE (int64_t)(sizeof discrete_points / sizeof discrete_points[0])

/* _i: the run (dtype, coordinate type). Each location samples its expected pixel, exactly: the
 * output is that pixel's value, grad_value adds grad_output there, the weight's gradient is the
 * value's dot product with grad_output, and every location gradient is zero. Then the whole
 * problem against the reference. */
START_TEST(discrete_sampling_takes_the_nearest_pixel_clamped) {
    const int64_t one[] = {1}, hw[] = {3, 4}, D = 2, W = 4;
    pt_case *c = pt_make(1, N_DISCRETE, 1, D, 1, one, hw, 0.0, 1600);
    c->sampling = MSDA_SAMPLING_DISCRETE;
    for (int64_t s = 0; s < c->S; s++) /* small integers: exact in every dtype */
        for (int64_t d = 0; d < D; d++) c->value[s * D + d] = d ? -(double)(s + 1) : (double)(2 * s + 1);
    for (int64_t q = 0; q < N_DISCRETE; q++) {
        c->loc[2 * q] = discrete_points[q].x;
        c->loc[2 * q + 1] = discrete_points[q].y;
        c->attn[q] = 1.0;
        c->gout[q * D] = (double)(q % 3 + 1) / 2;
        c->gout[q * D + 1] = -(double)(q % 5) / 4;
    }
    if (runs[_i].coord == MSDA_COORD_F32)
        pt_round_mixed(c, runs[_i].dtype);
    else
        pt_round(c, runs[_i].dtype);
    for (int64_t q = 0; q < N_DISCRETE; q++) /* the rounding leaves them as they are */
        ck_assert(c->loc[2 * q] == discrete_points[q].x || isnan(c->loc[2 * q]));
    results lib = alloc_results(c), ref = alloc_results(c);
    lib_run(c, runs[_i].dtype, runs[_i].coord, 1, &lib);
    double *want_gv = kt_alloc(c->n_value);
    for (int64_t q = 0; q < N_DISCRETE; q++) {
        const int64_t ix = discrete_points[q].ix, iy = discrete_points[q].iy, s = iy * W + ix;
        double want_ga = 0;
        for (int64_t d = 0; d < D; d++) {
            const double want = ix < 0 ? 0.0 : c->value[s * D + d];
            ck_assert_msg(lib.out[q * D + d] == want, "dtype %d: (%g, %g) gives %g, expected row %lld column %lld: %g",
                          (int)runs[_i].dtype, discrete_points[q].x, discrete_points[q].y, lib.out[q * D + d],
                          (long long)iy, (long long)ix, want);
            if (ix >= 0) want_gv[s * D + d] += c->gout[q * D + d], want_ga += c->gout[q * D + d] * want;
        }
        ck_assert_msg(lib.ga[q] == want_ga, "dtype %d: (%g, %g): weight gradient %g, expected %g",
                      (int)runs[_i].dtype, discrete_points[q].x, discrete_points[q].y, lib.ga[q], want_ga);
    }
    for (int64_t i = 0; i < c->n_value; i++)
        ck_assert_msg(lib.gv[i] == want_gv[i], "dtype %d: grad_value[%lld] is %g, expected %g", (int)runs[_i].dtype,
                      (long long)i, lib.gv[i], want_gv[i]);
    check_location_gradients_zero(c, lib.gl, "discrete edges");
    reference(c, &ref);
    ck_assert(kt_rel_err(lib.out, ref.out, c->n_out) == 0.0);
    ck_assert(kt_rel_err(lib.gv, ref.gv, c->n_value) == 0.0);
    free(want_gv);
    free_results(&lib), free_results(&ref);
    pt_free(c);
}
END_TEST

/* Locations where discrete sampling's pixel depends on the type its two steps are rounded in
 * (msda.h: the accumulation type), on a level of H = 3, W = 6. Each step of v * n + 0.5 rounded in
 * f64 lands below an edge that f32 rounding reaches, or, for f32 coordinates, f32 rounding lands
 * on an edge that the exact sum (what f64 gives) falls just short of. */
static const struct {
    double x, y;
    int64_t ix, iy;
} f64_steps[] = {
    /* x: 2.5 - 6 * 2^-40 + 0.5 is 2.99999999999454... in f64, 3 in f32; y likewise 1.99999... */
    {2.5 / 6 - 0x1p-40, 0.5 - 0x1p-40, 2, 1},
    /* x * 6 rounds to 2.5 in f64 (exactly 2.49999999999999978), so f = 3; y * 3 to 0.5 */
    {0x1.aaaaaaaaaaaaap-2, 0x1.5555555555555p-3, 3, 1},
}, f32_steps[] = {
    /* x * 6 rounds to 2.5 in f32 (exactly 2.4999999404), so f = 3 (f64: 2.99999994, pixel 2);
     * y * 3 is 0.49999997 in f32 too, but adding 0.5 rounds to 1 (f64: 0.99999997, pixel 0) */
    {0x1.aaaaaap-2, 0x1.555554p-3, 3, 1},
    {0x1.aaaaaap-2, 0.0, 3, 0},
    {0.0, 0x1.555554p-3, 0, 1},
};

/* _i: 0 f64; 1 f32; 2 and 3 f16 and bf16 beside f32 coordinates, computed in f32 too. */
START_TEST(discrete_steps_are_rounded_in_the_accumulation_type) {
    static const struct {
        msda_dtype dtype;
        msda_coord_type coord;
    } steps_runs[] = {{MSDA_F64, MSDA_COORD_SAME}, {MSDA_F32, MSDA_COORD_SAME}, {MSDA_F16, MSDA_COORD_F32},
                      {MSDA_BF16, MSDA_COORD_F32}};
    const msda_dtype dtype = steps_runs[_i].dtype;
    const int64_t n_points = _i == 0 ? 2 : 3, one[] = {1}, hw[] = {3, 6}, W = 6;
    pt_case *c = pt_make(1, n_points, 1, 1, 1, one, hw, 0.0, 1650);
    c->sampling = MSDA_SAMPLING_DISCRETE;
    for (int64_t s = 0; s < c->S; s++) c->value[s] = (double)(s + 1); /* the pixel's index + 1 */
    for (int64_t q = 0; q < n_points; q++) {
        c->loc[2 * q] = _i == 0 ? f64_steps[q].x : f32_steps[q].x;
        c->loc[2 * q + 1] = _i == 0 ? f64_steps[q].y : f32_steps[q].y;
        c->attn[q] = 1.0;
    }
    if (steps_runs[_i].coord == MSDA_COORD_F32)
        pt_round_mixed(c, dtype);
    else
        pt_round(c, dtype);
    results lib = alloc_results(c), ref = alloc_results(c);
    lib_run(c, dtype, steps_runs[_i].coord, 1, &lib);
    reference(c, &ref);
    for (int64_t q = 0; q < n_points; q++) {
        const int64_t ix = _i == 0 ? f64_steps[q].ix : f32_steps[q].ix, iy = _i == 0 ? f64_steps[q].iy : f32_steps[q].iy;
        ck_assert_msg(lib.out[q] == (double)(iy * W + ix + 1),
                      "dtype %d: (%a, %a) took pixel %g (row * W + column), expected row %lld column %lld", (int)dtype,
                      c->loc[2 * q], c->loc[2 * q + 1], lib.out[q] - 1, (long long)iy, (long long)ix);
        ck_assert(ref.out[q] == lib.out[q]); /* the reference rounds as msda.h says too */
    }
    free_results(&lib), free_results(&ref);
    pt_free(c);
}
END_TEST

/* Discrete sampling's weight is 1 at every location: a problem of only NaN locations gives an
 * all-zero output and gradients; one of only far and infinite locations (bilinear: nothing) gives
 * the corner pixels. */
START_TEST(discrete_nan_contributes_nothing_and_far_lands_on_the_edge) {
    const int64_t counts[] = {2, 3}, hw[] = {3, 4, 2, 2};
    pt_case *c = pt_make(2, 3, 2, 3, 2, counts, hw, 0.0, 1700);
    c->sampling = MSDA_SAMPLING_DISCRETE;
    for (int64_t i = 0; i < 2 * c->n_attn; i++) c->loc[i] = i % 3 ? NAN : 0.5;
    results lib = alloc_results(c);
    lib_run(c, MSDA_F32, MSDA_COORD_SAME, 2, &lib);
    int all_nan = 1;
    for (int64_t i = 0; i < c->n_attn; i++) all_nan &= isnan(c->loc[2 * i]) || isnan(c->loc[2 * i + 1]);
    ck_assert_msg(all_nan, "the test wants every point to hold a NaN");
    for (int64_t i = 0; i < c->n_out; i++) ck_assert_msg(lib.out[i] == 0.0, "output[%lld] = %g", (long long)i, lib.out[i]);
    for (int64_t i = 0; i < c->n_value; i++) ck_assert(lib.gv[i] == 0.0);
    for (int64_t i = 0; i < c->n_attn; i++) ck_assert(lib.ga[i] == 0.0);
    check_location_gradients_zero(c, lib.gl, "NaN locations");
    /* Far and infinite: (+inf, -inf) is column W-1 of row 0, (-5, 9) column 0 of row H-1. */
    for (int64_t i = 0; i < c->n_attn; i++) {
        c->loc[2 * i] = i % 2 ? INFINITY : -5.0;
        c->loc[2 * i + 1] = i % 2 ? -INFINITY : 9.0;
    }
    lib_run(c, MSDA_F64, MSDA_COORD_SAME, 2, &lib);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t q = 0; q < c->Lq; q++)
            for (int64_t m = 0; m < c->M; m++) {
                const int64_t g = (n * c->Lq + q) * c->M + m;
                for (int64_t d = 0; d < c->D; d++) {
                    double want = 0;
                    for (int64_t l = 0; l < c->L; l++)
                        for (int64_t p = 0; p < c->counts[l]; p++) {
                            const int64_t i = g * c->LP + c->first[l] + p, H = c->shapes[2 * l], W = c->shapes[2 * l + 1];
                            const int64_t at = i % 2 ? pixel_at(c, n, m, l, 0, W - 1) : pixel_at(c, n, m, l, H - 1, 0);
                            want += c->attn[i] * c->value[at + d];
                        }
                    ck_assert_double_eq_tol(lib.out[g * c->D + d], want, 1e-12);
                }
            }
    check_location_gradients_zero(c, lib.gl, "far locations");
    free_results(&lib);
    pt_free(c);
}
END_TEST

/* ---- threads, NULL level_points, validation ----------------------------------------------------- */

/* The result does not depend on the thread count, bit for bit, with per-level counts: weights
 * and logits, both samplings. */
START_TEST(threads_do_not_change_per_level_results) {
    for (int mode = 0; mode < 4; mode++) {
        pt_case *c = make_config(0, 0.1, 1800);
        c->sampling = mode & 1 ? MSDA_SAMPLING_DISCRETE : MSDA_SAMPLING_BILINEAR;
        c->weights = mode & 2 ? MSDA_WEIGHTS_LOGITS : MSDA_WEIGHTS_SOFTMAXED;
        results one = alloc_results(c);
        lib_run(c, MSDA_F32, MSDA_COORD_SAME, 1, &one);
        const int counts[] = {2, 3, 7, 0};
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            results many = alloc_results(c);
            lib_run(c, MSDA_F32, MSDA_COORD_SAME, counts[k], &many);
            ck_assert_msg(memcmp(one.out, many.out, sizeof(double) * (size_t)c->n_out) == 0,
                          "mode %d, %d threads: output differs", mode, counts[k]);
            ck_assert(memcmp(one.gv, many.gv, sizeof(double) * (size_t)c->n_value) == 0);
            ck_assert(memcmp(one.gl, many.gl, sizeof(double) * (size_t)(2 * c->n_attn)) == 0);
            ck_assert(memcmp(one.ga, many.ga, sizeof(double) * (size_t)c->n_attn) == 0);
            free_results(&many);
        }
        free_results(&one);
        pt_free(c);
    }
}
END_TEST

/* level_points NULL and sampling zero (what a caller of ABI 4 leaves there) keep the old
 * behaviour: P points on every level, bilinear; explicit equal counts give the same bits, and
 * both match the reference. */
START_TEST(null_level_points_keep_p_on_every_level) {
    pt_case *c = make_config(2, 0.25, 1900); /* counts 4, 4, 4 */
    results given = alloc_results(c), none = alloc_results(c), ref = alloc_results(c);
    lib_run(c, MSDA_F64, MSDA_COORD_SAME, 0, &given);
    c->pass_counts = 0;
    lib_run(c, MSDA_F64, MSDA_COORD_SAME, 0, &none);
    reference(c, &ref);
    ck_assert(memcmp(given.out, none.out, sizeof(double) * (size_t)c->n_out) == 0);
    ck_assert(memcmp(given.gv, none.gv, sizeof(double) * (size_t)c->n_value) == 0);
    ck_assert(memcmp(given.gl, none.gl, sizeof(double) * (size_t)(2 * c->n_attn)) == 0);
    ck_assert(memcmp(given.ga, none.ga, sizeof(double) * (size_t)c->n_attn) == 0);
    ck_assert(kt_rel_err(none.out, ref.out, c->n_out) < 1e-12);
    ck_assert(kt_rel_err(none.gl, ref.gl, 2 * c->n_attn) < 1e-12);
    free_results(&given), free_results(&none), free_results(&ref);
    pt_free(c);
}
END_TEST

/* A valid per-level problem (levels of 3, 6 and 3 points, P = 6) on host buffers, f32. */
typedef struct {
    int64_t shapes[6], starts[3], counts[3];
    float value[2 * 28 * 2], loc[2 * 2 * 12 * 2], attn[2 * 2 * 12], out[2 * 2 * 2];
    float gv[2 * 28 * 2], gl[2 * 2 * 12 * 2], ga[2 * 2 * 12];
    msda_forward_args fwd;
    msda_backward_args bwd;
} fixture;

static void fixture_init(fixture *f) {
    memset(f, 0, sizeof *f);
    const int64_t shapes[] = {4, 5, 2, 3, 1, 2}, starts[] = {0, 20, 26}, counts[] = {3, 6, 3};
    memcpy(f->shapes, shapes, sizeof shapes);
    memcpy(f->starts, starts, sizeof starts);
    memcpy(f->counts, counts, sizeof counts);
    const msda_sizes sizes = {.batch = 2, .spatial = 28, .heads = 1, .channels = 2, .queries = 2, .levels = 3,
                              .points = 6};
    f->fwd = (msda_forward_args){.dtype = MSDA_F32, .sizes = sizes, .spatial_shapes = f->shapes,
                                 .level_start = f->starts, .value = f->value, .sampling_locations = f->loc,
                                 .attention_weights = f->attn, .output = f->out, .level_points = f->counts};
    f->bwd = (msda_backward_args){.dtype = MSDA_F32, .sizes = sizes, .spatial_shapes = f->shapes,
                                  .level_start = f->starts, .value = f->value, .sampling_locations = f->loc,
                                  .attention_weights = f->attn, .grad_output = f->out, .grad_value = f->gv,
                                  .grad_sampling_locations = f->gl, .grad_attention_weights = f->ga,
                                  .level_points = f->counts};
}

static const struct {
    const char *what;
    int64_t counts[3];
    int sampling;
    msda_status want;
    const char *message; /* what the error's message must name */
} violations[] = {
    {"a level of 0 points", {3, 0, 3}, 0, MSDA_ERR_BAD_SIZE, "level_points[1] is 0"},
    {"a level of -2 points", {3, 6, -2}, 0, MSDA_ERR_BAD_SIZE, "level_points[2] is -2"},
    {"a level past P", {7, 6, 3}, 0, MSDA_ERR_BAD_SIZE, "level_points[0] is 7"},
    {"a level past P, the largest P", {3, 6, 9}, 0, MSDA_ERR_BAD_SIZE, "level_points[2] is 9"},
    {"P not the largest", {3, 5, 3}, 0, MSDA_ERR_BAD_SIZE, "P (points) is 6"},
    {"P not the largest, uniform", {5, 5, 5}, 0, MSDA_ERR_BAD_SIZE, "the largest of them, 5"},
    {"sampling 2", {3, 6, 3}, 2, MSDA_ERR_BAD_ARGUMENT, "sampling is 2"},
    {"sampling -1", {3, 6, 3}, -1, MSDA_ERR_BAD_ARGUMENT, "sampling is -1"},
};
#define N_VIOLATIONS (int)(sizeof violations / sizeof violations[0])

/* _i: the violation. Its status and a message naming it, from both validations and all four
 * calls (the CUDA ones check before opening a driver), and no output touched. */
START_TEST(bad_level_points_and_sampling_are_refused) {
    fixture f;
    fixture_init(&f);
    memcpy(f.counts, violations[_i].counts, sizeof f.counts);
    f.fwd.sampling = f.bwd.sampling = (msda_sampling)violations[_i].sampling;
    const msda_status want = violations[_i].want;
    msda_error err;
    memset(&err, 0x5a, sizeof err);
    ck_assert_int_eq(msda_validate_forward(&f.fwd, &err), want);
    ck_assert_int_eq(err.status, want);
    ck_assert_msg(strstr(err.message, violations[_i].message), "%s: message '%s' does not say '%s'",
                  violations[_i].what, err.message, violations[_i].message);
    ck_assert_int_eq(msda_validate_backward(&f.bwd, &err), want);
    ck_assert_msg(strstr(err.message, violations[_i].message), "backward: %s", err.message);
    for (size_t i = 0; i < sizeof f.out / sizeof f.out[0]; i++) f.out[i] = 42.0f;
    for (size_t i = 0; i < sizeof f.gv / sizeof f.gv[0]; i++) f.gv[i] = 42.0f;
    ck_assert_int_eq(msda_forward_cpu(&f.fwd, 0, &err), want);
    ck_assert_int_eq(msda_backward_cpu(&f.bwd, 0, &err), want);
    ck_assert_int_eq(msda_forward_cuda(&f.fwd, NULL, &err), want);
    ck_assert_int_eq(msda_backward_cuda(&f.bwd, NULL, &err), want);
    size_t bytes = 1;
    ck_assert_int_eq(msda_backward_cuda_workspace(&f.bwd, &bytes, &err), want);
    for (size_t i = 0; i < sizeof f.out / sizeof f.out[0]; i++) ck_assert(f.out[i] == 42.0f);
    for (size_t i = 0; i < sizeof f.gv / sizeof f.gv[0]; i++) ck_assert(f.gv[i] == 42.0f);
}
END_TEST

/* The fixture the violations start from is valid, on both samplings, and so are counts of 1
 * on every level with P = 1. */
START_TEST(valid_level_points_are_taken) {
    fixture f;
    fixture_init(&f);
    for (size_t i = 0; i < sizeof f.loc / sizeof f.loc[0]; i++) f.loc[i] = 0.3f;
    for (size_t i = 0; i < sizeof f.attn / sizeof f.attn[0]; i++) f.attn[i] = 0.5f;
    msda_error err;
    ck_assert_int_eq(msda_validate_forward(&f.fwd, &err), MSDA_OK);
    ck_assert_int_eq(msda_forward_cpu(&f.fwd, 0, &err), MSDA_OK);
    ck_assert_int_eq(msda_backward_cpu(&f.bwd, 0, &err), MSDA_OK);
    f.fwd.sampling = f.bwd.sampling = MSDA_SAMPLING_DISCRETE;
    ck_assert_int_eq(msda_forward_cpu(&f.fwd, 0, &err), MSDA_OK);
    ck_assert_int_eq(msda_backward_cpu(&f.bwd, 0, &err), MSDA_OK);
    /* Every level at P = 1 is valid too (1, 1, 1 with points 1). */
    const int64_t ones[] = {1, 1, 1};
    f.fwd.level_points = ones;
    f.fwd.sizes.points = 1;
    ck_assert_int_eq(msda_validate_forward(&f.fwd, &err), MSDA_OK);
}
END_TEST

TCase *kt_tcase_points(void) {
    TCase *tc = tcase_create("points");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, per_level_counts_match_the_reference, 0, N_CONFIGS);
    tcase_add_loop_test(tc, per_level_logits_match_the_reference, 0, N_CONFIGS);
    tcase_add_loop_test(tc, per_level_equals_padding_with_zero_weights, 0, N_CONFIGS);
    tcase_add_loop_test(tc, discrete_sampling_takes_the_nearest_pixel_clamped, 0, (int)N_RUNS);
    tcase_add_loop_test(tc, discrete_steps_are_rounded_in_the_accumulation_type, 0, 4);
    tcase_add_test(tc, discrete_nan_contributes_nothing_and_far_lands_on_the_edge);
    tcase_add_test(tc, threads_do_not_change_per_level_results);
    tcase_add_test(tc, null_level_points_keep_p_on_every_level);
    tcase_add_loop_test(tc, bad_level_points_and_sampling_are_refused, 0, N_VIOLATIONS);
    tcase_add_test(tc, valid_level_points_are_taken);
    return tc;
}
