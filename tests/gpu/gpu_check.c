/* GPU check of libmsda: the CUDA forward and backward against the library's CPU path, for each
 * data type on the Deformable-DETR shapes and others (D in 12, 16, 24, 32, 64, 71; batch 1 to 16),
 * with attention weights, and with logits through the fused softmax (MSDA_WEIGHTS_LOGITS); and
 * ABI 5's point count per level (level_points) and discrete sampling, f16 and bf16 also beside f32
 * coordinates (MSDA_COORD_F32).
 * Outputs are poisoned (all bits set: NaN) before each run, so an unwritten element fails.
 * Prints one row per case and a summary line "N passed, M failed"; exits non-zero on failure.
 *
 * Usage: gpu-check [--small] [--dtypes f32,f64,f16,bf16] [--label TEXT]
 *   --small   one small case per dtype (for compute-sanitizer) */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msda.h"
#include "msda_half.h"

#define CHECK_CU(call)                                                                             \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = NULL;                                                                 \
            cuGetErrorName(r_, &n_);                                                               \
            fprintf(stderr, "gpu-check: %s failed: %s\n", #call, n_ ? n_ : "?");                   \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static const int64_t detr_shapes[] = {100, 134, 50, 67, 25, 34, 13, 17};
static const int64_t small_shapes[] = {10, 13, 5, 7, 3, 4, 2, 2};
/* Levels of 1, 6 and 400 positions under 1000 queries of 2 points (8000 adds a level): f16
 * replicas by the ten on the first two (msda_plan.h: 63 and 11), bf16's more (250 and 42), and
 * the third in place. (With 4000 queries the CAS variant's one f16 sum of 32000 adds on the first
 * level was 1e-2 from the CPU path: that strategy's own error.) */
static const int64_t tiny_shapes[] = {1, 1, 2, 3, 20, 20};

typedef struct gcase {
    const char *name;
    int64_t N, Lq, M, D, L, P;
    const int64_t *shapes; /* L rows; Lq = 0 means Lq = S (an encoder) */
} gcase;

static const gcase full_cases[] = {
    {"enc_b2", 2, 0, 8, 32, 4, 4, detr_shapes},     {"enc_b8", 8, 0, 8, 32, 4, 4, detr_shapes},
    {"dec_b2_q900", 2, 900, 8, 32, 4, 4, detr_shapes}, {"enc_b1_d16", 1, 0, 8, 16, 4, 4, detr_shapes},
    {"enc_b3_d64", 3, 0, 8, 64, 4, 4, detr_shapes}, {"enc_b1_d71", 1, 0, 8, 71, 4, 4, detr_shapes},
    {"dec_b16_d16", 16, 900, 8, 16, 4, 4, detr_shapes}, {"dec_b5_d64", 5, 900, 8, 64, 4, 4, detr_shapes},
    {"dec_b16_d71", 16, 900, 8, 71, 4, 4, detr_shapes}, {"dec_b3_d24", 3, 900, 8, 24, 4, 4, detr_shapes},
    {"small_m3_l1_p1_d5", 5, 37, 3, 5, 1, 1, small_shapes},
    /* M * D = 36: the f32 buffer's conversion in vectors of 4 (32 and 568 above take 8, 15 one) */
    {"enc_b2_m3_d12", 2, 0, 3, 12, 4, 4, detr_shapes},
    {"tiny_levels_q1000", 2, 1000, 2, 8, 3, 2, tiny_shapes},
};
static const gcase small_cases[] = {
    {"small_d32", 2, 60, 4, 32, 4, 4, small_shapes},
    {"small_d5", 3, 17, 3, 5, 2, 3, small_shapes},
    {"small_m3_d12", 2, 60, 3, 12, 4, 4, small_shapes},
};

/* ABI 5: a point count per level (msda.h, level_points; P is the largest). RT-DETR v2's and
 * D-FINE's decoders take their num_points_list so, on the three levels of a 640 input (strides
 * 8, 16, 32); {1, 2, 3, 4} on Deformable-DETR's four levels as a decoder, as an encoder (whose
 * 16-bit backward buffers levels, planned from the largest count) and with D = 71 (staged: several
 * chunks a lane of the padded rows). */
typedef struct points_case {
    gcase g;
    const int64_t *level_points; /* g.L counts */
} points_case;

static const int64_t rtdetr_shapes[] = {80, 80, 40, 40, 20, 20};
static const int64_t points_363[] = {3, 6, 3}, points_1234[] = {1, 2, 3, 4}, points_253[] = {2, 5, 3};

static const points_case full_points_cases[] = {
    {{"rtdetr_363_q300", 2, 300, 8, 32, 3, 6, rtdetr_shapes}, points_363},
    {{"dec_1234_q900", 2, 900, 8, 32, 4, 4, detr_shapes}, points_1234},
    {{"enc_b1_1234", 1, 0, 8, 32, 4, 4, detr_shapes}, points_1234},
    {{"dec_1234_d71", 3, 100, 8, 71, 4, 4, detr_shapes}, points_1234},
};
static const points_case small_points_cases[] = {
    {{"small_363", 2, 60, 4, 32, 3, 6, small_shapes}, points_363},
    {{"small_1234_d5", 3, 17, 3, 5, 4, 4, small_shapes}, points_1234},
    {{"small_253_m3_d12", 2, 40, 3, 12, 3, 5, small_shapes}, points_253},
};

/* What a run adds to a case beside the dtype (NULL in run_case: P points on every level, bilinear
 * sampling, coordinates in the dtype). */
typedef struct variant {
    const int64_t *level_points; /* L counts, or NULL */
    msda_sampling sampling;
    msda_coord_type coord; /* MSDA_COORD_F32: locations, weights and their gradients in f32 */
} variant;

static const char *dtype_name(msda_dtype t) {
    static const char *const names[] = {"f32", "f64", "f16", "bf16"};
    return names[t];
}
static size_t dtype_bytes(msda_dtype t) { return t == MSDA_F64 ? 8 : t == MSDA_F32 ? 4 : 2; }

static uint64_t rng = 88172645463325252ULL;
static double unit(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

static void *host_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "gpu-check: out of host memory (%zu bytes)\n", bytes);
        exit(2);
    }
    return p;
}

static void store(void *buf, int64_t i, double x, msda_dtype t) {
    switch (t) {
    case MSDA_F32: ((float *)buf)[i] = (float)x; break;
    case MSDA_F64: ((double *)buf)[i] = x; break;
    case MSDA_F16: ((uint16_t *)buf)[i] = msda_f32_to_f16((float)x); break;
    case MSDA_BF16: ((uint16_t *)buf)[i] = msda_f32_to_bf16((float)x); break;
    }
}
static double load(const void *buf, int64_t i, msda_dtype t) {
    switch (t) {
    case MSDA_F32: return ((const float *)buf)[i];
    case MSDA_F64: return ((const double *)buf)[i];
    case MSDA_F16: return msda_f16_to_f32(((const uint16_t *)buf)[i]);
    default: return msda_bf16_to_f32(((const uint16_t *)buf)[i]);
    }
}

/* ||gpu - cpu|| / ||cpu|| over the elements where the CPU is finite; infinite where the GPU has
 * a non-finite value the CPU has not, or a finite one where the CPU has NaN (a softmax row of
 * -inf logits: both must give NaN). */
static double rel_err(const void *gpu, const void *cpu, int64_t n, msda_dtype t) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double g = load(gpu, i, t), c = load(cpu, i, t);
        if (!isfinite(g) && isfinite(c)) return INFINITY;
        if (isnan(c) != isnan(g)) return INFINITY;
        if (isnan(c)) continue;
        num += (g - c) * (g - c);
        den += c * c;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

typedef struct tensors {
    int64_t n_value, n_out, n_attn; /* n_attn: N * Lq * M * (a group's points) */
    size_t eb, ceb; /* bytes of an element of the dtype, and of the coordinates' type */
    msda_dtype ct;  /* the coordinates' type */
    void *value, *loc, *attn, *gout;
} tensors;

/* The level of point lp of a group, a->level_points giving each level's points (NULL: P). */
static int64_t level_of_point(const msda_forward_args *a, int64_t lp) {
    int64_t l = 0;
    for (int64_t end = 0; l < a->sizes.levels; l++) {
        end += a->level_points ? a->level_points[l] : a->sizes.points;
        if (lp < end) break;
    }
    return l;
}

/* logits: attention_weights drawn as softmax logits in [-4, 4] (a few rows get a -inf entry,
 * and one row is all -inf: NaN there, on both paths alike), else as weights in [0, 1/4].
 * Locations and weights in ct, each level with a->level_points' points where set. 2% of the
 * coordinates are special (non-finite, far, on and just past the borders); with `edges` 2% more
 * on pixel centres, which are discrete sampling's edges (v * n + 0.5 an integer, where both paths
 * must round alike). Without, the draws are those of the cases before ABI 5. */
static void make_inputs(const msda_forward_args *a, msda_dtype t, msda_dtype ct, int logits, int edges,
                        tensors *x) {
    const msda_sizes *s = &a->sizes;
    int64_t LP = 0;
    for (int64_t l = 0; l < s->levels; l++) LP += a->level_points ? a->level_points[l] : s->points;
    x->eb = dtype_bytes(t);
    x->ct = ct;
    x->ceb = dtype_bytes(ct);
    x->n_value = s->batch * s->spatial * s->heads * s->channels;
    x->n_out = s->batch * s->queries * s->heads * s->channels;
    x->n_attn = s->batch * s->queries * s->heads * LP;
    x->value = host_alloc((size_t)x->n_value * x->eb);
    x->gout = host_alloc((size_t)x->n_out * x->eb);
    x->attn = host_alloc((size_t)x->n_attn * x->ceb);
    x->loc = host_alloc((size_t)x->n_attn * 2 * x->ceb);
    for (int64_t i = 0; i < x->n_value; i++) store(x->value, i, 2 * unit() - 1, t);
    for (int64_t i = 0; i < x->n_out; i++) store(x->gout, i, 2 * unit() - 1, t);
    for (int64_t i = 0; i < x->n_attn; i++) store(x->attn, i, logits ? 8 * unit() - 4 : unit() / 4, ct);
    if (logits) {
        for (int64_t i = 0; i < x->n_attn; i += 97 * LP + 3) store(x->attn, i, -INFINITY, ct);
        for (int64_t k = 0; k < LP; k++) store(x->attn, x->n_attn - LP + k, -INFINITY, ct);
    }
    static const double special[] = {NAN, INFINITY, -INFINITY, 1e30, -5.0, 0.0, 1.0, 1.0001, -0.0001};
    for (int64_t i = 0; i < 2 * x->n_attn; i++) {
        const double u = unit();
        if (edges && u >= 0.02 && u < 0.04) {
            const int64_t l = level_of_point(a, (i / 2) % LP), n = a->spatial_shapes[2 * l + 1 - i % 2]; /* x: W */
            store(x->loc, i, (floor(unit() * (double)(n + 1)) + 0.5) / (double)n, ct);
            continue;
        }
        store(x->loc, i, u < 0.02 ? special[(int)(unit() * 9) % 9] : 1.2 * unit() - 0.1, ct);
    }
}

static void free_inputs(tensors *x) {
    free(x->value), free(x->loc), free(x->attn), free(x->gout);
}

static CUdeviceptr upload(const void *src, size_t bytes) {
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, bytes));
    CHECK_CU(cuMemcpyHtoD(d, src, bytes));
    return d;
}

static CUdeviceptr poisoned(size_t bytes, CUstream s) {
    CUdeviceptr d;
    CHECK_CU(cuMemAlloc(&d, bytes));
    CHECK_CU(cuMemsetD8Async(d, 0xff, bytes, s));
    return d;
}

static int failures, passes;

static void report(const char *label, const char *name, msda_dtype t, const msda_sizes *s,
                   double ef, double ev, double el, double ea, const char *note) {
    const double tol = t == MSDA_F32 || t == MSDA_F64 ? 1e-5 : 1e-2;
    const int ok = ef < tol && ev < tol && el < tol && ea < tol;
    printf("%-10s %-18s %-5s %3lld %3lld  %9.2e %9.2e %9.2e %9.2e  %s%s\n", label, name,
           dtype_name(t), (long long)s->batch, (long long)s->channels, ef, ev, el, ea,
           ok ? "PASS" : "FAIL", note);
    fflush(stdout);
    ok ? passes++ : failures++;
}

static int msda_ok(msda_status st, const msda_error *e, const char *what) {
    if (st == MSDA_OK) return 1;
    printf("  %s: %s (%s)\n", what, msda_status_string(st), e->message);
    return 0;
}

/* One case in one dtype: CPU path, then the GPU; `offset` elements shift value and grad_value
 * off their 16-byte alignment, to run the one-element-per-access kernels; `device_table`: the
 * GPU calls take the level table from device memory (msda.h, MSDA_DEVICE); `weights`: what
 * attention_weights holds (MSDA_WEIGHTS_LOGITS: the fused-softmax kernels). */
/* deterministic: the backward's exact sums (msda.h), run twice: the second run's grad_value must
 * be the first's, bit for bit. v: the level counts, sampling and coordinate type (run_case_v). */
static void run_case_v(const char *label, const gcase *g, msda_dtype t, CUstream stream, int offset,
                       int device_table, msda_weights weights, int deterministic, const variant *v) {
    static const variant plain = {NULL, MSDA_SAMPLING_BILINEAR, MSDA_COORD_SAME};
    if (!v) v = &plain;
    int64_t starts[MSDA_MAX_LEVELS], S = 0;
    for (int64_t l = 0; l < g->L; l++) {
        starts[l] = S;
        S += g->shapes[2 * l] * g->shapes[2 * l + 1];
    }
    msda_forward_args f = {.dtype = t, .sizes = {g->N, S, g->M, g->D, g->Lq ? g->Lq : S, g->L, g->P},
                           .spatial_shapes = g->shapes, .level_start = starts, .weights = weights,
                           .coord_type = v->coord, .level_points = v->level_points, .sampling = v->sampling};
    tensors x;
    make_inputs(&f, t, v->coord == MSDA_COORD_F32 ? MSDA_F32 : t, weights == MSDA_WEIGHTS_LOGITS, v != &plain, &x);
    const size_t eb = x.eb, ceb = x.ceb;
    void *cpu_out = host_alloc((size_t)x.n_out * eb), *gpu_out = host_alloc((size_t)x.n_out * eb);
    void *cpu_gv = host_alloc((size_t)x.n_value * eb), *gpu_gv = host_alloc((size_t)x.n_value * eb);
    void *cpu_gl = host_alloc((size_t)x.n_attn * 2 * ceb), *gpu_gl = host_alloc((size_t)x.n_attn * 2 * ceb);
    void *cpu_ga = host_alloc((size_t)x.n_attn * ceb), *gpu_ga = host_alloc((size_t)x.n_attn * ceb);
    msda_error e;
    msda_backward_args b = {.dtype = t, .sizes = f.sizes, .spatial_shapes = g->shapes, .level_start = starts,
                            .value = x.value, .sampling_locations = x.loc, .attention_weights = x.attn,
                            .grad_output = x.gout, .grad_value = cpu_gv, .grad_sampling_locations = cpu_gl,
                            .grad_attention_weights = cpu_ga, .weights = weights, .coord_type = v->coord,
                            .level_points = v->level_points, .sampling = v->sampling};
    f.value = x.value, f.sampling_locations = x.loc, f.attention_weights = x.attn, f.output = cpu_out;
    int ok = msda_ok(msda_forward_cpu(&f, 0, &e), &e, "cpu forward") &&
             msda_ok(msda_backward_cpu(&b, 0, &e), &e, "cpu backward");

    const size_t shift = (size_t)offset * eb;
    CUdeviceptr d_value_base;
    CHECK_CU(cuMemAlloc(&d_value_base, (size_t)x.n_value * eb + shift));
    CHECK_CU(cuMemcpyHtoD(d_value_base + shift, x.value, (size_t)x.n_value * eb));
    CUdeviceptr d_value = d_value_base + shift;
    CUdeviceptr d_loc = upload(x.loc, (size_t)x.n_attn * 2 * ceb), d_attn = upload(x.attn, (size_t)x.n_attn * ceb);
    CUdeviceptr d_gout = upload(x.gout, (size_t)x.n_out * eb);
    CUdeviceptr d_out = poisoned((size_t)x.n_out * eb, stream);
    CUdeviceptr d_gv_base = poisoned((size_t)x.n_value * eb + shift, stream), d_gv = d_gv_base + shift;
    CUdeviceptr d_gl = poisoned((size_t)x.n_attn * 2 * ceb, stream), d_ga = poisoned((size_t)x.n_attn * ceb, stream);

    msda_forward_args gf = f;
    gf.value = (void *)(uintptr_t)d_value, gf.sampling_locations = (void *)(uintptr_t)d_loc;
    gf.attention_weights = (void *)(uintptr_t)d_attn, gf.output = (void *)(uintptr_t)d_out;
    CUdeviceptr d_shapes = 0, d_starts = 0, d_status = 0;
    if (device_table) {
        d_shapes = upload(g->shapes, (size_t)g->L * 2 * sizeof(int64_t));
        d_starts = upload(starts, (size_t)g->L * sizeof(int64_t));
        CHECK_CU(cuMemAlloc(&d_status, sizeof(int32_t)));
        CHECK_CU(cuMemsetD32(d_status, 0, 1));
        gf.level_table = MSDA_DEVICE;
        gf.spatial_shapes = (const int64_t *)(uintptr_t)d_shapes;
        gf.level_start = (const int64_t *)(uintptr_t)d_starts;
        gf.device_status = (int32_t *)(uintptr_t)d_status;
    }
    msda_backward_args gb = b;
    gb.level_table = gf.level_table, gb.spatial_shapes = gf.spatial_shapes;
    gb.level_start = gf.level_start, gb.device_status = gf.device_status;
    gb.value = gf.value, gb.sampling_locations = gf.sampling_locations;
    gb.attention_weights = gf.attention_weights, gb.grad_output = (void *)(uintptr_t)d_gout;
    gb.grad_value = (void *)(uintptr_t)d_gv, gb.grad_sampling_locations = (void *)(uintptr_t)d_gl;
    gb.grad_attention_weights = (void *)(uintptr_t)d_ga;
    gb.deterministic = deterministic;
    /* The aligned runs pass a workspace where one is wanted; the misaligned ones let the library
     * allocate its own. */
    size_t ws_bytes = 0;
    CUdeviceptr d_ws = 0;
    ok = ok && msda_ok(msda_backward_cuda_workspace(&gb, &ws_bytes, &e), &e, "cuda workspace size");
    if (ok && ws_bytes && !offset) {
        CHECK_CU(cuMemAlloc(&d_ws, ws_bytes));
        gb.workspace = (void *)(uintptr_t)d_ws, gb.workspace_bytes = ws_bytes;
    }
    ok = ok && msda_ok(msda_forward_cuda(&gf, stream, &e), &e, "cuda forward") &&
         msda_ok(msda_backward_cuda(&gb, stream, &e), &e, "cuda backward");
    CHECK_CU(cuStreamSynchronize(stream));
    if (ok && deterministic) { /* again, before the table's memory is freed */
        void *first = host_alloc((size_t)x.n_value * eb), *again = host_alloc((size_t)x.n_value * eb);
        CHECK_CU(cuMemcpyDtoH(first, d_gv, (size_t)x.n_value * eb));
        ok = msda_ok(msda_backward_cuda(&gb, stream, &e), &e, "cuda backward, again");
        CHECK_CU(cuStreamSynchronize(stream));
        CHECK_CU(cuMemcpyDtoH(again, d_gv, (size_t)x.n_value * eb));
        if (ok && memcmp(again, first, (size_t)x.n_value * eb) != 0) {
            printf("  the deterministic backward's grad_value differs on a second run\n");
            ok = 0;
        }
        free(first), free(again);
    }
    if (device_table) { /* a consistent table: nothing stored */
        int32_t status = -1;
        CHECK_CU(cuMemcpyDtoH(&status, d_status, sizeof status));
        if (status != 0) {
            printf("  device_status %d after a consistent table\n", (int)status);
            ok = 0;
        }
        CHECK_CU(cuMemFree(d_shapes));
        CHECK_CU(cuMemFree(d_starts));
        CHECK_CU(cuMemFree(d_status));
    }
    CHECK_CU(cuMemcpyDtoH(gpu_out, d_out, (size_t)x.n_out * eb));
    CHECK_CU(cuMemcpyDtoH(gpu_gv, d_gv, (size_t)x.n_value * eb));
    CHECK_CU(cuMemcpyDtoH(gpu_gl, d_gl, (size_t)x.n_attn * 2 * ceb));
    CHECK_CU(cuMemcpyDtoH(gpu_ga, d_ga, (size_t)x.n_attn * ceb));
    char name[80];
    snprintf(name, sizeof name, "%s%s%s%s%s", deterministic ? "det_" : "", weights == MSDA_WEIGHTS_LOGITS ? "softmax_" : "",
             v->sampling == MSDA_SAMPLING_DISCRETE ? "disc_" : "", v->coord == MSDA_COORD_F32 ? "c32_" : "", g->name);
    if (ok && v->sampling == MSDA_SAMPLING_DISCRETE) /* constant between pixel edges */
        for (int64_t i = 0; i < 2 * x.n_attn; i++)
            if (load(gpu_gl, i, x.ct) != 0.0) {
                printf("  grad_sampling_locations[%lld] is %g under discrete sampling\n", (long long)i,
                       load(gpu_gl, i, x.ct));
                ok = 0;
                break;
            }
    if (ok) {
        report(label, name, t, &f.sizes, rel_err(gpu_out, cpu_out, x.n_out, t),
               rel_err(gpu_gv, cpu_gv, x.n_value, t), rel_err(gpu_gl, cpu_gl, 2 * x.n_attn, x.ct),
               rel_err(gpu_ga, cpu_ga, x.n_attn, x.ct),
               device_table ? "  (level table in device memory)"
               : offset     ? (ws_bytes ? "  (misaligned: staged; library-allocated workspace)"
                                        : "  (misaligned: staged)")
                            : (ws_bytes ? "  (caller's workspace)" : ""));
    } else {
        report(label, name, t, &f.sizes, INFINITY, INFINITY, INFINITY, INFINITY, "  (call failed)");
    }
    CUdeviceptr all[] = {d_value_base, d_loc, d_attn, d_gout, d_out, d_gv_base, d_gl, d_ga};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CHECK_CU(cuMemFree(all[i]));
    if (d_ws) CHECK_CU(cuMemFree(d_ws));
    free(cpu_out), free(gpu_out), free(cpu_gv), free(gpu_gv), free(cpu_gl), free(gpu_gl), free(cpu_ga), free(gpu_ga);
    free_inputs(&x);
}

static void run_case(const char *label, const gcase *g, msda_dtype t, CUstream stream, int offset,
                     int device_table, msda_weights weights, int deterministic) {
    run_case_v(label, g, t, stream, offset, device_table, weights, deterministic, NULL);
}

/* ABI 5 in dtype t: each per-level case with bilinear and discrete sampling, the table on the
 * host and on the device, f16 and bf16 also beside f32 coordinates (--small: the device table and
 * f32 coordinates on the first case only, for the sanitizers' time); discrete sampling on P points
 * a level (the encoder and the decoder, misaligned, the table on the device); the fused softmax
 * over the sum of the counts, both samplings, and misaligned; the deterministic backward with
 * per-level counts, plain and fused with the table on the device. */
static void run_points_cases(const char *label, int small, msda_dtype t, CUstream stream) {
    const points_case *cases = small ? small_points_cases : full_points_cases;
    const int n = small ? (int)(sizeof small_points_cases / sizeof small_points_cases[0])
                        : (int)(sizeof full_points_cases / sizeof full_points_cases[0]);
    const int half = t == MSDA_F16 || t == MSDA_BF16;
    for (int c = 0; c < n; c++) {
        const gcase *g = &cases[c].g;
        for (int sampling = 0; sampling < 2; sampling++) {
            const variant v = {cases[c].level_points, (msda_sampling)sampling, MSDA_COORD_SAME};
            run_case_v(label, g, t, stream, 0, 0, MSDA_WEIGHTS_SOFTMAXED, 0, &v);
            if (small && c > 0) continue;
            run_case_v(label, g, t, stream, 0, 1, MSDA_WEIGHTS_SOFTMAXED, 0, &v);
            if (!half) continue;
            const variant c32 = {cases[c].level_points, (msda_sampling)sampling, MSDA_COORD_F32};
            run_case_v(label, g, t, stream, 0, 0, MSDA_WEIGHTS_SOFTMAXED, 0, &c32);
        }
    }
    const variant disc = {NULL, MSDA_SAMPLING_DISCRETE, MSDA_COORD_SAME};
    const gcase *plain = small ? &small_cases[0] : &full_cases[2]; /* the decoder */
    if (!small) run_case_v(label, &full_cases[0], t, stream, 0, 0, MSDA_WEIGHTS_SOFTMAXED, 0, &disc);
    run_case_v(label, plain, t, stream, 0, 0, MSDA_WEIGHTS_SOFTMAXED, 0, &disc);
    run_case_v(label, plain, t, stream, 1, 0, MSDA_WEIGHTS_SOFTMAXED, 0, &disc);
    run_case_v(label, plain, t, stream, 0, 1, MSDA_WEIGHTS_SOFTMAXED, 0, &disc);
    if (half) {
        const variant disc32 = {NULL, MSDA_SAMPLING_DISCRETE, MSDA_COORD_F32};
        run_case_v(label, plain, t, stream, 0, 0, MSDA_WEIGHTS_SOFTMAXED, 0, &disc32);
    }
    for (int sampling = 0; sampling < 2; sampling++) {
        const variant v = {cases[0].level_points, (msda_sampling)sampling, MSDA_COORD_SAME};
        run_case_v(label, &cases[0].g, t, stream, 0, 0, MSDA_WEIGHTS_LOGITS, 0, &v);
    }
    const variant misaligned = {cases[1].level_points, MSDA_SAMPLING_BILINEAR, MSDA_COORD_SAME};
    run_case_v(label, &cases[1].g, t, stream, 1, 0, MSDA_WEIGHTS_LOGITS, 0, &misaligned);
    const variant exact = {cases[0].level_points, MSDA_SAMPLING_BILINEAR, MSDA_COORD_SAME};
    run_case_v(label, &cases[0].g, t, stream, 0, 0, MSDA_WEIGHTS_SOFTMAXED, 1, &exact);
    run_case_v(label, &cases[0].g, t, stream, 0, 1, MSDA_WEIGHTS_LOGITS, 1, &exact);
}

/* An inconsistent level table in device memory (level_start[2] off by one): the kernels index
 * nothing (compute-sanitizer's memcheck runs this too), write NaN to the output and to the
 * location and weight gradients, and store MSDA_ERR_LEVEL_START in device_status. In f16 and
 * bf16 the backward's kernels plan the f32 buffer from that table: none, and the value gradient
 * stays zero. */
static void check_bad_device_table(const char *label, msda_dtype t, CUstream stream) {
    const gcase *g = &small_cases[0];
    int64_t starts[4] = {0, 130, 165, 177}; /* right: 0, 130, 165, 177; made wrong below */
    starts[2] += 1;
    int64_t S = 0;
    for (int64_t l = 0; l < g->L; l++) S += g->shapes[2 * l] * g->shapes[2 * l + 1];
    msda_forward_args f = {.dtype = t, .sizes = {g->N, S, g->M, g->D, g->Lq, g->L, g->P},
                           .spatial_shapes = g->shapes, .level_start = starts};
    tensors x;
    make_inputs(&f, t, t, 0, 0, &x);
    const size_t eb = x.eb;
    CUdeviceptr d_value = upload(x.value, (size_t)x.n_value * eb), d_loc = upload(x.loc, (size_t)x.n_attn * 2 * eb);
    CUdeviceptr d_attn = upload(x.attn, (size_t)x.n_attn * eb), d_gout = upload(x.gout, (size_t)x.n_out * eb);
    CUdeviceptr d_shapes = upload(g->shapes, (size_t)g->L * 2 * sizeof(int64_t));
    CUdeviceptr d_starts = upload(starts, sizeof starts), d_status, d_out, d_gv, d_gl, d_ga;
    CHECK_CU(cuMemAlloc(&d_status, sizeof(int32_t)));
    CHECK_CU(cuMemsetD32(d_status, 0, 1));
    CUdeviceptr *zeroed[] = {&d_out, &d_gv, &d_gl, &d_ga}; /* zeros, not the NaN poison */
    const size_t sizes[] = {(size_t)x.n_out * eb, (size_t)x.n_value * eb, (size_t)x.n_attn * 2 * eb,
                            (size_t)x.n_attn * eb};
    for (int i = 0; i < 4; i++) {
        CHECK_CU(cuMemAlloc(zeroed[i], sizes[i]));
        CHECK_CU(cuMemsetD8(*zeroed[i], 0, sizes[i]));
    }
    f.level_table = MSDA_DEVICE;
    f.spatial_shapes = (const int64_t *)(uintptr_t)d_shapes, f.level_start = (const int64_t *)(uintptr_t)d_starts;
    f.device_status = (int32_t *)(uintptr_t)d_status;
    f.value = (void *)(uintptr_t)d_value, f.sampling_locations = (void *)(uintptr_t)d_loc;
    f.attention_weights = (void *)(uintptr_t)d_attn, f.output = (void *)(uintptr_t)d_out;
    msda_backward_args b = {.dtype = t, .sizes = f.sizes, .spatial_shapes = f.spatial_shapes,
                            .level_start = f.level_start, .level_table = MSDA_DEVICE,
                            .device_status = f.device_status, .value = f.value,
                            .sampling_locations = f.sampling_locations, .attention_weights = f.attention_weights,
                            .grad_output = (void *)(uintptr_t)d_gout, .grad_value = (void *)(uintptr_t)d_gv,
                            .grad_sampling_locations = (void *)(uintptr_t)d_gl,
                            .grad_attention_weights = (void *)(uintptr_t)d_ga};
    msda_error e;
    int ok = msda_ok(msda_forward_cuda(&f, stream, &e), &e, "cuda forward") &&
             msda_ok(msda_backward_cuda(&b, stream, &e), &e, "cuda backward");
    CHECK_CU(cuStreamSynchronize(stream));
    int32_t status = 0;
    CHECK_CU(cuMemcpyDtoH(&status, d_status, sizeof status));
    size_t largest = 0;
    for (int i = 0; i < 4; i++) largest = sizes[i] > largest ? sizes[i] : largest;
    unsigned char *host = host_alloc(largest);
    int all_nan[4] = {1, 1, 1, 1}, gv_zero = 1;
    for (int i = 0; i < 4; i++) {
        CHECK_CU(cuMemcpyDtoH(host, *zeroed[i], sizes[i]));
        for (size_t k = 0; k < sizes[i] / eb; k++) {
            all_nan[i] &= isnan(load(host, (int64_t)k, t));
            if (i == 1) gv_zero &= load(host, (int64_t)k, t) == 0.0;
        }
    }
    ok = ok && status == MSDA_ERR_LEVEL_START && all_nan[0] && gv_zero && all_nan[2] && all_nan[3];
    printf("%-10s %-18s %-5s %3s %3s  device_status %d, output %s, grad_value %s, grad_loc/attn %s  %s\n", label,
           "bad_device_table", dtype_name(t), "-", "-", (int)status, all_nan[0] ? "NaN" : "not NaN",
           gv_zero ? "zero" : "not zero", all_nan[2] && all_nan[3] ? "NaN" : "not NaN", ok ? "PASS" : "FAIL");
    ok ? passes++ : failures++;
    CUdeviceptr all[] = {d_value, d_loc, d_attn, d_gout, d_shapes, d_starts, d_status, d_out, d_gv, d_gl, d_ga};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) CHECK_CU(cuMemFree(all[i]));
    free(host);
    free_inputs(&x);
}

/* The CUDA path refuses to run with no current context, with its own status. */
static void check_no_context(const char *label) {
    CUcontext saved;
    CHECK_CU(cuCtxGetCurrent(&saved));
    CHECK_CU(cuCtxSetCurrent(NULL));
    msda_error e;
    const msda_status st = msda_cuda_prepare(&e);
    CHECK_CU(cuCtxSetCurrent(saved));
    const int ok = st == MSDA_ERR_NO_CONTEXT;
    printf("%-10s %-18s %-5s %3s %3s  %s: %s  %s\n", label, "no_context", "-", "-", "-",
           msda_status_string(st), e.message, ok ? "PASS" : "FAIL");
    ok ? passes++ : failures++;
}

/* "f32,f16" and the like: each name must match a whole comma-separated item. */
static void parse_dtypes(const char *list, int *want) {
    for (int t = 0; t < 4; t++) want[t] = 0;
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        for (int t = 0; t < 4; t++)
            if (len == strlen(dtype_name((msda_dtype)t)) && !strncmp(p, dtype_name((msda_dtype)t), len)) want[t] = 1;
        p += len + (p[len] == ',');
    }
}

int main(int argc, char **argv) {
    int small = 0, want[4] = {1, 1, 1, 1};
    const char *label = "default";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) small = 1;
        else if (!strcmp(argv[i], "--dtypes") && i + 1 < argc) parse_dtypes(argv[++i], want);
        else if (!strcmp(argv[i], "--label") && i + 1 < argc) label = argv[++i];
        else {
            fprintf(stderr, "usage: gpu-check [--small] [--dtypes LIST] [--label TEXT]\n");
            return 2;
        }
    }
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    int ndev = 0;
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGetCount(&ndev));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    char archs[512];
    msda_embedded_archs_string(archs, sizeof archs);
    printf("libmsda %s, %d GPU(s), embedded: %s\n", msda_version(), ndev, archs);
    {
        /* The image this GPU and driver loaded (MSDA_IMAGE may force one). */
        int index = -1;
        char image[96] = "?";
        msda_error ie;
        if (msda_cuda_loaded_fatbin(&index, &ie) == MSDA_OK) msda_fatbin_describe(index, image, sizeof image);
        else snprintf(image, sizeof image, "none: %s", ie.message);
        printf("loaded image: %s%s%s\n", image, getenv("MSDA_IMAGE") ? ", forced by MSDA_IMAGE=" : "",
               getenv("MSDA_IMAGE") ? getenv("MSDA_IMAGE") : "");
    }
    printf("%-10s %-18s %-5s %3s %3s  %9s %9s %9s %9s  %s\n", "build", "case", "dtype", "N", "D",
           "fwd", "grad_val", "grad_loc", "grad_attn", "result");

    const gcase *cases = small ? small_cases : full_cases;
    const int ncases = small ? (int)(sizeof small_cases / sizeof small_cases[0])
                             : (int)(sizeof full_cases / sizeof full_cases[0]);
    for (int t = 0; t < 4; t++) {
        if (!want[t]) continue;
        for (int c = 0; c < ncases; c++) run_case(label, &cases[c], (msda_dtype)t, stream, 0, 0, MSDA_WEIGHTS_SOFTMAXED, 0);
        run_case(label, &cases[small ? 0 : 2], (msda_dtype)t, stream, 1, 0, MSDA_WEIGHTS_SOFTMAXED, 0);
        for (int c = 0; c < (small ? 1 : 3); c++)
            run_case(label, &cases[c], (msda_dtype)t, stream, 0, 1, MSDA_WEIGHTS_SOFTMAXED, 0);
        /* The replicas planned by the kernels from a device table, in the host's bound. */
        if (!small) run_case(label, &cases[ncases - 1], (msda_dtype)t, stream, 0, 1, MSDA_WEIGHTS_SOFTMAXED, 0);
        /* The fused softmax: the encoder (all-buffer bf16 backward), the decoder (points split
         * over lanes in the forward, mixed bf16 backward), D = 71 (staged to a multiple of the
         * narrowest vector), misaligned, and the table on the device. */
        static const int softmax_full[] = {0, 2, 5}, softmax_small[] = {0, 1};
        const int *sm = small ? softmax_small : softmax_full;
        for (int c = 0; c < (small ? 2 : 3); c++)
            run_case(label, &cases[sm[c]], (msda_dtype)t, stream, 0, 0, MSDA_WEIGHTS_LOGITS, 0);
        run_case(label, &cases[small ? 0 : 2], (msda_dtype)t, stream, 1, 0, MSDA_WEIGHTS_LOGITS, 0);
        run_case(label, &cases[0], (msda_dtype)t, stream, 0, 1, MSDA_WEIGHTS_LOGITS, 0);
        /* The deterministic backward: the encoder, the decoder, D = 71, misaligned (staged, in
         * the library's own workspace), the table on the device, the fused softmax. */
        static const int exact_full[] = {0, 2, 5}, exact_small[] = {0, 1};
        for (int c = 0; c < (small ? 2 : 3); c++)
            run_case(label, &cases[(small ? exact_small : exact_full)[c]], (msda_dtype)t, stream, 0, 0,
                     MSDA_WEIGHTS_SOFTMAXED, 1);
        run_case(label, &cases[small ? 0 : 2], (msda_dtype)t, stream, 1, 0, MSDA_WEIGHTS_SOFTMAXED, 1);
        run_case(label, &cases[0], (msda_dtype)t, stream, 0, 1, MSDA_WEIGHTS_SOFTMAXED, 1);
        run_case(label, &cases[0], (msda_dtype)t, stream, 0, 0, MSDA_WEIGHTS_LOGITS, 1);
    }
    for (int t = 0; t < 4; t++)
        if (want[t] && t != MSDA_F64) check_bad_device_table(label, (msda_dtype)t, stream);
    if (!small) {
        check_no_context(label);
        /* A second context on device 0, and every other device: the device code is loaded
         * once per context and launches go to the current one. */
        for (int d = 0; d < ndev; d++) {
            CUcontext other;
            CUdevice od;
            CUstream os;
            CHECK_CU(cuDeviceGet(&od, d));
            CHECK_CU(cuCtxCreate(&other, NULL, 0, od));
            CHECK_CU(cuStreamCreate(&os, CU_STREAM_NON_BLOCKING));
            char name[32];
            snprintf(name, sizeof name, "ctx2_dev%d", d);
            gcase g = small_cases[0];
            g.name = name;
            run_case(label, &g, want[MSDA_F32] ? MSDA_F32 : MSDA_F16, os, 0, 0, MSDA_WEIGHTS_SOFTMAXED, 0);
            CHECK_CU(cuStreamDestroy(os));
            CHECK_CU(cuCtxDestroy(other));
            CHECK_CU(cuCtxSetCurrent(ctx));
        }
    }
    /* ABI 5 last, so that every case above draws the inputs it always has. */
    for (int t = 0; t < 4; t++)
        if (want[t]) run_points_cases(label, small, (msda_dtype)t, stream);
    printf("%d passed, %d failed\n", passes, failures);
    CHECK_CU(cuStreamDestroy(stream));
    CHECK_CU(cuDevicePrimaryCtxRelease(dev));
    return failures ? 1 : 0;
}
