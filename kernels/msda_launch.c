/* The CUDA path: validation, choice of kernel and launch sizes, and the launches, on the
 * caller's stream in the caller's current context. Every failure returns at once. */
#include <stdint.h>
#include <string.h>

#include "msda_internal.h"
#include "msda_module.h"
#include "msda_plan.h"

/* The vector widths of each dtype's kernels, widest first, with their ids; ended by width 0.
 * No kernel takes one element a lane: a problem that none of its row takes (D not a multiple, a
 * pointer not aligned) is staged (below). */
typedef struct {
    int vec;
    msda_kernel_id fwd, bwd;
} vec_kernels;

/* [weights are logits (fused softmax)][dtype][coordinates in f32 beside a 16-bit value]; a
 * 16-bit value's kernels of 4 elements a lane are built for its own coordinates only
 * (msda_kernels.cu, MSDA_16BIT_SET). */
static const vec_kernels dtype_kernels[2][4][2][3] = {
    {
    [MSDA_F32] = {{{4, K_FWD_F32_V4, K_BWD_F32_V4}}},
    [MSDA_F64] = {{{2, K_FWD_F64_V2, K_BWD_F64_V2}}},
    [MSDA_F16] = {{{8, K_FWD_F16_V8, K_BWD_F16_V8}, {4, K_FWD_F16_V4, K_BWD_F16_V4}},
                  {{8, K_FWD_F16C32_V8, K_BWD_F16C32_V8}}},
    [MSDA_BF16] = {{{8, K_FWD_BF16_V8, K_BWD_BF16_V8}, {4, K_FWD_BF16_V4, K_BWD_BF16_V4}},
                   {{8, K_FWD_BF16C32_V8, K_BWD_BF16C32_V8}}},
    },
    {
    [MSDA_F32] = {{{4, K_SFWD_F32_V4, K_SBWD_F32_V4}}},
    [MSDA_F64] = {{{2, K_SFWD_F64_V2, K_SBWD_F64_V2}}},
    [MSDA_F16] = {{{8, K_SFWD_F16_V8, K_SBWD_F16_V8}, {4, K_SFWD_F16_V4, K_SBWD_F16_V4}},
                  {{8, K_SFWD_F16C32_V8, K_SBWD_F16C32_V8}}},
    [MSDA_BF16] = {{{8, K_SFWD_BF16_V8, K_SBWD_BF16_V8}, {4, K_SFWD_BF16_V4, K_SBWD_BF16_V4}},
                   {{8, K_SFWD_BF16C32_V8, K_SBWD_BF16C32_V8}}},
    },
};

/* The backward without the native path, every level buffered, 4 elements a lane, either
 * coordinate type: [logits][bf16]. */
static const msda_kernel_id all_buffer_kernels[2][2] = {
    {K_BWDBUF_F16_V4, K_BWDBUF_BF16_V4},
    {K_SBWDBUF_F16_V4, K_SBWDBUF_BF16_V4},
};
#define ALL_BUFFER_VEC 4

/* bf16's half sums (msda_device.cuh, MSDA_BF16_HALF_SUMS): [logits][coordinates f32][the
 * width's place in dtype_kernels' row: 8, 4 for bf16's own coordinates, 8 for f32]. */
static const msda_kernel_id half_sum_kernels[2][2][2] = {
    {{K_BWDHALF_BF16_V8, K_BWDHALF_BF16_V4}, {K_BWDHALF_BF16C32_V8}},
    {{K_SBWDHALF_BF16_V8, K_SBWDHALF_BF16_V4}, {K_SBWDHALF_BF16C32_V8}},
};

/* The deterministic backward (exact sums), either coordinate type: [logits][dtype], of
 * exact_vec elements a lane. Each element's sum is its own 64-bit atomic, which bounds these
 * kernels: a 16-bit value's take 8 bytes a lane (msda_kernels.cu, MSDA_EXACT_SET). */
static const msda_kernel_id exact_kernels[2][4] = {
    {[MSDA_F32] = K_BWDX_F32_V4, [MSDA_F64] = K_BWDX_F64_V2, [MSDA_F16] = K_BWDX_F16_V4, [MSDA_BF16] = K_BWDX_BF16_V4},
    {[MSDA_F32] = K_SBWDX_F32_V4, [MSDA_F64] = K_SBWDX_F64_V2, [MSDA_F16] = K_SBWDX_F16_V4,
     [MSDA_BF16] = K_SBWDX_BF16_V4},
};
static int exact_vec(msda_dtype dtype) { return dtype == MSDA_F64 ? 2 : 4; }
/* Their bounds: [dtype][coordinates f32]; and the rounding: [dtype]. */
static const msda_kernel_id exact_bounds_kernels[4][2] = {
    [MSDA_F32] = {K_XBOUNDS_F32}, [MSDA_F64] = {K_XBOUNDS_F64},
    [MSDA_F16] = {K_XBOUNDS_F16, K_XBOUNDS_F16C32}, [MSDA_BF16] = {K_XBOUNDS_BF16, K_XBOUNDS_BF16C32}};
static const msda_kernel_id exact_finish_kernels[4] = {
    [MSDA_F32] = K_XFINISH_F32, [MSDA_F64] = K_XFINISH_F64, [MSDA_F16] = K_XFINISH_F16, [MSDA_BF16] = K_XFINISH_BF16};

static int aligned(const void *p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

/* Whether vectors of vec elements fit the problem: vec divides D and every pointer is aligned
 * to it, so that vectors never straddle a head's row and every access is one aligned load. */
static int vec_fits(const msda_problem *pb, int vec, const void *const *ptrs, int n) {
    int ok = pb->D % vec == 0;
    for (int i = 0; ok && i < n; i++) ok = aligned(ptrs[i], (size_t)vec * msda_dtype_size(pb->dtype));
    return ok;
}

/* The widest vector of the row of kernels for coordinates in f32 or not (coord_f32), at most
 * max_vec elements, that fits; NULL where none does (the call is staged). */
static const vec_kernels *pick_vec(const msda_problem *pb, int coord_f32, int max_vec, const void *const *ptrs,
                                   int n) {
    for (const vec_kernels *v = dtype_kernels[pb->logits][pb->dtype][coord_f32]; v->vec; v++)
        if (v->vec <= max_vec && vec_fits(pb, v->vec, ptrs, n)) return v;
    return NULL;
}

/* The narrowest width of a row of kernels: what a staged problem's D is rounded up to. */
static int narrowest_vec(const msda_problem *pb, int coord_f32) {
    const vec_kernels *v = dtype_kernels[pb->logits][pb->dtype][coord_f32];
    while (v[1].vec) v++;
    return v->vec;
}

static void fill_params(const msda_problem *pb, int vec, const int64_t *shapes, const int64_t *starts,
                        int32_t *device_status, msda_kparams *kp) {
    memset(kp, 0, sizeof *kp);
    kp->spatial = pb->S;
    kp->queries = pb->Lq;
    kp->heads = (int32_t)pb->M;
    kp->channels = (int32_t)pb->D;
    kp->levels = (int32_t)pb->L;
    kp->points = (int32_t)pb->P;
    kp->chunks = (int32_t)(pb->D / vec);
    int lanes_log2 = 0;
    while (lanes_log2 < 5 && (1 << lanes_log2) < kp->chunks) lanes_log2++;
    kp->lanes_log2 = lanes_log2;
    kp->groups = pb->N * pb->Lq * pb->M;
    kp->coord_f32 = pb->coord_f32;
    kp->sampling = pb->discrete;
    kp->total_points = (int32_t)pb->LP;
    for (int64_t l = 0; l < pb->L; l++) {
        kp->level_points[l] = (int32_t)pb->level_points[l];
        kp->level_point_start[l] = (int32_t)pb->point_start[l];
    }
    kp->parts_log2 = 0;
    kp->threads = ((kp->groups << lanes_log2) + 31) / 32 * 32;
    if (pb->table_on_device) { /* the kernels read and check it */
        kp->level_shapes = (uint64_t)(uintptr_t)shapes;
        kp->level_starts = (uint64_t)(uintptr_t)starts;
        kp->device_status = (uint64_t)(uintptr_t)device_status;
        return;
    }
    for (int64_t l = 0; l < pb->L; l++) {
        kp->level_h[l] = (int32_t)pb->level_h[l];
        kp->level_w[l] = (int32_t)pb->level_w[l];
        kp->level_start[l] = pb->level_start[l];
    }
}

/* `threads` threads in each of `rows` rows of blocks (blockIdx.y), in blocks of the kernel's size;
 * rows at most 65535, the driver's limit (the kernels loop over the rest). */
static msda_status launch_rows(const msda_driver *drv, const msda_kernel *k, msda_kparams *kp, int64_t threads,
                               int64_t rows, CUstream stream, msda_error *err) {
    const int64_t blocks = (threads + k->block - 1) / k->block;
    const unsigned grid = blocks > INT32_MAX ? INT32_MAX : (unsigned)blocks; /* loops cover the rest */
    const unsigned grid_y = rows > 65535 ? 65535u : (unsigned)rows;
    void *params[] = {kp};
    const CUresult r = drv->LaunchKernel(k->fn, grid, grid_y, 1, (unsigned)k->block, 1, 1, 0, stream, params, NULL);
    return r == CUDA_SUCCESS ? MSDA_OK : msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, k->name);
}

/* `threads` threads (kp->threads but where a thread takes several elements), in blocks of the
 * kernel's size. */
static msda_status launch_threads(const msda_driver *drv, const msda_kernel *k, msda_kparams *kp, int64_t threads,
                                  CUstream stream, msda_error *err) {
    return launch_rows(drv, k, kp, threads, 1, stream, err);
}

static msda_status launch(const msda_driver *drv, const msda_kernel *k, msda_kparams *kp, CUstream stream,
                          msda_error *err) {
    return launch_threads(drv, k, kp, kp->threads, stream, err);
}

/* Validation, the driver and the module, shared by both directions. */
static msda_status prepare(const msda_problem *pb, const msda_driver **drv, const msda_module **mod,
                           msda_error *err) {
    msda_status st = msda_driver_get(drv, err);
    if (st == MSDA_OK) st = msda_module_get(*drv, mod, err);
    if (st != MSDA_OK) return st;
    const int enabled = pb->dtype == MSDA_F16    ? (*mod)->config.f16_enabled
                        : pb->dtype == MSDA_BF16 ? (*mod)->config.bf16_enabled
                                                 : 1;
    if (!enabled)
        return msda_fail(err, MSDA_ERR_DTYPE_NOT_BUILT, "the device code loaded here (from compute_%d PTX) has no %s kernels",
                         (*mod)->config.arch, msda_dtype_name(pb->dtype));
    return MSDA_OK;
}

msda_status msda_cuda_prepare(msda_error *err) {
    const msda_driver *drv;
    const msda_module *mod;
    msda_status st = msda_driver_get(&drv, err);
    return st == MSDA_OK ? msda_module_get(drv, &mod, err) : st;
}

msda_status msda_cuda_loaded_fatbin(int *index, msda_error *err) {
    const msda_driver *drv;
    const msda_module *mod;
    if (!index) return msda_fail(err, MSDA_ERR_NULL_ARGUMENT, "index is NULL");
    msda_status st = msda_driver_get(&drv, err);
    if (st == MSDA_OK) st = msda_module_get(drv, &mod, err);
    if (st == MSDA_OK) *index = mod->fatbin;
    return st;
}

/* Device memory a call works in: the caller's (msda_backward_args.workspace), else allocated
 * here, stream-ordered where the driver has it, else a plain allocation (then freed after the
 * stream drains). */
typedef struct {
    CUdeviceptr ptr;
    int own;   /* allocated here, and freed by workspace_release */
    int async; /* by MemAllocAsync */
} workspace;

static msda_status workspace_take(void *given, const msda_driver *drv, CUstream s, size_t bytes, workspace *w,
                                  msda_error *err) {
    w->ptr = (CUdeviceptr)(uintptr_t)given;
    w->own = !given;
    w->async = 0;
    if (!w->own) return MSDA_OK;
    CUresult r = CUDA_ERROR_NOT_SUPPORTED;
    if (drv->MemAllocAsync && drv->MemFreeAsync) {
        r = drv->MemAllocAsync(&w->ptr, bytes, s);
        w->async = r == CUDA_SUCCESS;
    }
    if (r == CUDA_ERROR_NOT_SUPPORTED) r = drv->MemAlloc(&w->ptr, bytes);
    if (r == CUDA_SUCCESS) return MSDA_OK;
    w->own = 0; /* nothing to free */
    return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "allocating the call's workspace");
}

/* Frees a workspace allocated here; returns st, or the failure to free where st is MSDA_OK (the
 * first failure is the one reported). */
static msda_status workspace_release(const msda_driver *drv, CUstream s, const workspace *w, msda_status st,
                                     msda_error *err) {
    if (!w->own) return st;
    CUresult r;
    if (w->async) {
        r = drv->MemFreeAsync(w->ptr, s);
    } else {
        r = drv->StreamSynchronize(s);
        const CUresult r2 = drv->MemFree(w->ptr);
        if (r == CUDA_SUCCESS) r = r2;
    }
    if (st != MSDA_OK) return st;
    return r == CUDA_SUCCESS ? MSDA_OK : msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "freeing the call's workspace");
}

/* Staging. A problem that no kernel's vectors fit (D not a multiple of the narrowest vector of
 * its row, or value, output, grad_output or grad_value not aligned to it) runs as the problem
 * of D rounded up to that vector, on copies in device memory of the call's own (the forward) or
 * in its workspace (the backward): value and grad_output padded with zero channels, output and
 * grad_value taken back out. A zero channel adds exact zeros to the location and weight
 * gradients' sums, so the results are the problem's own, up to the order of those sums. It
 * replaces kernels of one element a lane, a third of one architecture's compile time, and is
 * faster than they were (kernels/PERF.md, "Staged rows"). */
#define STAGE_ALIGN 256
static size_t stage_round(size_t bytes) { return (bytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN; }
static int64_t round_up(int64_t D, int vec) { return (D + vec - 1) / vec * vec; }

static msda_status no_staged_kernel(msda_error *err) {
    return msda_fail(err, MSDA_ERR_DTYPE_NOT_BUILT, "the device code has no kernel for the staged problem");
}

/* `rows` rows of `from` elements at src copied to rows of `to` elements at dst, a wider row's
 * rest zeroed (msda_kernels.cu, restride). */
static msda_status restride(const msda_driver *drv, const msda_module *mod, const msda_problem *pb, CUdeviceptr dst,
                            int64_t to, const void *src, int64_t from, int64_t rows, CUstream stream,
                            msda_error *err) {
    const msda_kernel *k = &mod->kernels[K_RESTRIDE];
    if (!k->fn) return msda_fail(err, MSDA_ERR_DTYPE_NOT_BUILT, "the device code has no %s", k->name);
    /* The widest unit of 8, 4 or 2 bytes that both rows and both pointers are whole units of
     * (every element type is whole 2-byte units, every pointer of the op element-aligned). */
    const size_t es = msda_dtype_size(pb->dtype);
    int unit = 8;
    while (unit > 2 && ((size_t)from * es % (size_t)unit || (size_t)to * es % (size_t)unit || !aligned(src, (size_t)unit) ||
                        !aligned((const void *)(uintptr_t)dst, (size_t)unit)))
        unit /= 2;
    msda_kparams kp;
    memset(&kp, 0, sizeof kp);
    kp.value = (uint64_t)(uintptr_t)src;
    kp.output = (uint64_t)dst;
    kp.chunks = unit;
    kp.spatial = from * (int64_t)es / unit;
    kp.queries = to * (int64_t)es / unit;
    kp.groups = rows;
    const int64_t total = rows * kp.queries, wave = (int64_t)k->min_grid * k->block;
    return launch_threads(drv, k, &kp, total < wave ? total : wave, stream, err);
}

/* The staged copy of a problem: the args with D rounded up to `vec`, validated as the call's. */
static msda_status stage_problem_forward(const msda_forward_args *a, int vec, msda_forward_args *sa, msda_problem *sp,
                                         msda_error *err) {
    *sa = *a;
    sa->sizes.channels = round_up(a->sizes.channels, vec);
    return msda_check_forward(sa, sp, err); /* the pointers are the caller's until the copies are made */
}

/* Whether the forward's points kernel (msda_kernels.cu, forward_points) takes the problem:
 * MSDA_FAST_POINTS points on every level, bilinear sampling, one chunk a lane, x and y of a point aligned as a pair,
 * and a batch element's value (S M D elements) under 2^32 bytes, which its 32-bit offsets
 * need. With the widest vectors: 16-bit values in 8-byte vectors (twice the lanes, 40 registers, 6 blocks an SM) took 0.199 ms
 * against 0.161 in 16-byte ones (H200, enc_b2 f16, kernels/PERF.md). */
static int use_points_kernel(const msda_problem *pb, const msda_forward_args *a, const msda_kparams *kp) {
    const size_t coord = pb->coord_f32 ? sizeof(float) : msda_dtype_size(pb->dtype);
    return pb->P == MSDA_FAST_POINTS && pb->uniform && !pb->discrete && kp->chunks == 1 << kp->lanes_log2 &&
           aligned(a->sampling_locations, 2 * coord) &&
           (uint64_t)pb->S * pb->M * pb->D * msda_dtype_size(pb->dtype) <= UINT32_MAX;
}

static msda_status forward_staged(const msda_forward_args *a, const msda_problem *pb, const msda_driver *drv,
                                  const msda_module *mod, CUstream stream, msda_error *err);

/* The forward of a validated problem; `staged`: it is a staged copy (which every kernel row fits). */
static msda_status forward_run(const msda_forward_args *a, const msda_problem *pb, const msda_driver *drv,
                               const msda_module *mod, CUstream stream, int staged, msda_error *err) {
    const void *const ptrs[] = {a->value, a->output};
    const vec_kernels *v = pick_vec(pb, pb->coord_f32, 8, ptrs, 2);
    if (!v) return staged ? no_staged_kernel(err) : forward_staged(a, pb, drv, mod, stream, err);
    msda_kparams kp;
    fill_params(pb, v->vec, a->spatial_shapes, a->level_start, a->device_status, &kp);
    const int points = use_points_kernel(pb, a, &kp);
    kp.value = (uint64_t)(uintptr_t)a->value;
    kp.locations = (uint64_t)(uintptr_t)a->sampling_locations;
    kp.weights = (uint64_t)(uintptr_t)a->attention_weights;
    kp.output = (uint64_t)(uintptr_t)a->output;
    const msda_kernel *k = points ? &mod->points[v->fwd] : &mod->kernels[v->fwd];
    if (!k->fn) return msda_fail(err, MSDA_ERR_DTYPE_NOT_BUILT, "the device code has no %s", k->name);
    /* Too few groups to fill the device twice over: split the points (the points kernel: the
     * levels) over more lanes. */
    const int64_t fill = (int64_t)k->min_grid * k->block, split = points ? pb->L : pb->LP;
    while (kp.lanes_log2 + kp.parts_log2 < 5 && ((int64_t)2 << kp.parts_log2) <= split &&
           (kp.groups << (kp.lanes_log2 + kp.parts_log2)) < 2 * fill)
        kp.parts_log2++;
    kp.threads = ((kp.groups << (kp.lanes_log2 + kp.parts_log2)) + 31) / 32 * 32;
    /* The points kernels in one wave of resident blocks looping over the work, on the
     * architectures where MSDA_POINTS16_WAVES says so (msda_device.cuh): 16-bit values where the
     * work is more than a wave and at most points16_waves waves; f32 only where its points are
     * split (a decoder: the split stops past 2 waves, so at most 4) and past 2 waves. H200, f32
     * forward, graph ms, a block per tile / one wave: dec_b2_q900 (3.4 waves) 0.0183 / 0.0170,
     * fused 0.0215 / 0.0194, table on the GPU 0.0197 / 0.0174; dec_b1_q900 (1.7 waves) 0.0103 /
     * 0.0107 (kernels/PERF.md, session 12). On the encoder (unsplit) f32 was 4% slower so. */
    const int64_t blocks = (kp.threads + k->block - 1) / k->block, wave = k->min_grid;
    const int32_t most = mod->config.points16_waves;
    const int one_wave = msda_dtype_size(pb->dtype) == 2 ? blocks > wave && blocks <= most * wave
                         : pb->dtype == MSDA_F32 && most > 0 && kp.parts_log2 > 0 && blocks > 2 * wave;
    if (points && one_wave) return launch_threads(drv, k, &kp, wave * k->block, stream, err);
    return launch(drv, k, &kp, stream, err);
}

msda_status msda_forward_cuda(const msda_forward_args *a, void *stream, msda_error *err) {
    msda_problem pb;
    const msda_driver *drv;
    const msda_module *mod;
    msda_status st = msda_check_forward(a, &pb, err);
    if (st == MSDA_OK) st = prepare(&pb, &drv, &mod, err);
    return st == MSDA_OK ? forward_run(a, &pb, drv, mod, (CUstream)stream, 0, err) : st;
}

static int backward_strategy(const msda_module *mod, msda_dtype dtype) {
    return dtype == MSDA_F16    ? mod->config.f16_atomic
           : dtype == MSDA_BF16 ? mod->config.bf16_atomic
                                : MSDA_ATOMIC_NATIVE;
}

/* The mixed strategy's limit (msda_plan.h, msda_level_buffered). Measured on an H200 (bench.py,
 * enc_b2, f16, grad_value against f32, backward ms): every level native 3.0e-3 / 0.540 (over
 * issue 11's 2e-3), limit 1024: 1.5e-3 / 0.677, 256: 8.0e-4 / 0.755, 32 (every level buffered):
 * 2.1e-4 / 0.793; 256 keeps a margin of 2.5. bf16's step is 8 times coarser: 32 keeps it under
 * ~0.6e-2 even if every level sat at the limit (README.md). */
#define F16_MIXED_MAX_ADDS 256
#define BF16_MIXED_MAX_ADDS 32
/* Where the device code has bf16's half sums it has no mixed bf16 backward (msda_kernels.cu):
 * past half sums' limit bf16 takes the f32-buffer strategy's rule, every level. */
static int32_t buffer_max_adds(const msda_module *mod, msda_dtype dtype, int strategy, int half_sums) {
    if (strategy == MSDA_ATOMIC_F32_BUFFER) return 0; /* every level */
    if (dtype == MSDA_F16 || half_sums) return F16_MIXED_MAX_ADDS;
    return mod->config.bf16_half_sums ? 0 : BF16_MIXED_MAX_ADDS;
}

/* bf16's half sums (msda_device.cuh, MSDA_BF16_HALF_SUMS): where the device code has them, for
 * the mixed strategy, up to HALF_SUMS_MAX_ADDS queries * points. The kernels scale the sums for
 * the most adds an element can take (Lq * P, msda_kernels.cu, half_sum_exponent), so the more
 * there can be, the closer a usual sum sits to f16's subnormals; past 2^20 the f32 buffer's rule. */
#define HALF_SUMS_MAX_ADDS ((int64_t)1 << 20)
static int half_sums_apply(const msda_module *mod, const msda_problem *pb, int strategy) {
    return pb->dtype == MSDA_BF16 && mod->config.bf16_half_sums && strategy == MSDA_ATOMIC_MIXED &&
           pb->Lq * pb->P <= HALF_SUMS_MAX_ADDS;
}
/* Under half sums the workspace ends with the two bounds' bits (msda_kparams.half_sums), after
 * the f32 buffer: at its start the buffer keeps the workspace's alignment, which its lane pairs'
 * 32-byte `red`s need to fill whole sectors (16 bytes ahead of it: 95 M reduction sectors for
 * 57 M, H200, enc_b2 bf16, kernels/PERF.md). */
#define HALF_SUMS_BOUND_BYTES 16

/* How far the backward spreads its queries (msda_kernels.cu, backward_place_of): into as many
 * runs as the device code allows, each of at least SPREAD_MIN_RUN queries. */
#define SPREAD_MIN_RUN 128
static int32_t spread_log2(int64_t Lq, int32_t most) {
    int32_t s = 0;
    while (s < most && (Lq + ((int64_t)2 << s) - 1) >> (s + 1) >= SPREAD_MIN_RUN) s++;
    return s;
}

/* The phases a batch element's heads take in the backward (msda_kernels.cu, backward_place_of):
 * as many as the device code allows and M divides, where the element's slots need more threads
 * than a wave of resident blocks holds. Within one wave every slot runs at once whatever the
 * order, and two phases cost the decoder there (H100, dec_b2_q900 f32 0.0762 -> 0.0785 ms, in a
 * build with the phases fixed at compile time; kernels/PERF.md, session 21). */
static int32_t head_phases_log2(int64_t element_threads, int64_t wave_threads, int32_t M, int32_t most) {
    if (element_threads <= wave_threads) return 0;
    int32_t h = most;
    while (h > 0 && M % (1 << h)) h--;
    return h;
}

/* f16 replicas (msda_plan.h) where the device code has them (msda_device.cuh,
 * MSDA_F16_REPLICA_ADDS): the mixed f16 backward, and bf16's under half sums. The limit is the
 * device code's, so that a variant built with another is planned by its own. */
static int32_t replica_adds(const msda_module *mod, const msda_problem *pb, int strategy, int half_sums) {
    if (strategy != MSDA_ATOMIC_MIXED) return 0;
    return pb->dtype == MSDA_F16 ? mod->config.f16_replica_adds : half_sums ? mod->config.bf16_replica_adds : 0;
}

/* The f32 buffer of the 16-bit backward, or its f16 replicas (msda_plan.h). */
typedef struct buffer_plan {
    uint32_t levels;   /* the buffered (replicated) levels where the host knows them (0: none,
                          or planned by the kernels) */
    int32_t max_adds;  /* > 0: the kernels plan from the device table with this limit */
    int64_t spatial;   /* the buffer's rows per batch element; 0: no buffer */
    int every_level;   /* it holds every level, rows = spatial positions: the all-buffer kernel,
                          which writes every element of grad_value */
    int half_sums;     /* bf16's native levels add as scaled f16 (half_sums_apply) */
    int32_t replica_adds; /* > 0: the buffer holds f16 replicas, planned with this limit by the
                             kernels (from any table) and `spatial` rows long */
    int64_t positions; /* under replicas, the replicated levels' positions (a bound where the
                          table is on the device): the gather's work */
} buffer_plan;

/* Every level in the f32 buffer: the all-buffer kernel's plan. */
static buffer_plan every_level_plan(const msda_problem *pb) {
    return (buffer_plan){.levels = msda_all_levels(pb->L), .spatial = pb->S, .every_level = 1};
}

static buffer_plan plan_buffer(const msda_problem *pb, const msda_module *mod) {
    buffer_plan bp = {0, 0, 0, 0, 0, 0, 0};
    const int strategy = backward_strategy(mod, pb->dtype);
    if (strategy != MSDA_ATOMIC_F32_BUFFER && strategy != MSDA_ATOMIC_MIXED) return bp;
    const int half_sums = half_sums_apply(mod, pb, strategy);
    bp.replica_adds = replica_adds(mod, pb, strategy, half_sums);
    if (bp.replica_adds > 0) {
        bp.half_sums = half_sums;
        if (pb->table_on_device) { /* the kernels plan from the table: room for any table */
            bp.spatial = msda_replica_rows_bound(pb->L, pb->S, pb->Lq, pb->P, bp.replica_adds);
            bp.positions = msda_buffer_rows_bound(pb->L, pb->S, pb->Lq, pb->P, bp.replica_adds);
        } else {
            int64_t hw[MSDA_MAX_LEVELS], reps[MSDA_MAX_LEVELS], base[MSDA_MAX_LEVELS];
            for (int64_t l = 0; l < pb->L; l++) hw[l] = pb->level_h[l] * pb->level_w[l];
            bp.spatial = msda_plan_replicas(pb->L, hw, pb->Lq, pb->P, bp.replica_adds, reps, base);
            for (int64_t l = 0; l < pb->L; l++) {
                if (reps[l] > 1) bp.levels |= 1u << l, bp.positions += hw[l];
            }
        }
        /* Replicas past what a tensor may hold (few positions under a great many points an
         * element): every level in the f32 buffer instead, whose rows are at most S. */
        if (bp.spatial <= MSDA_MAX_ELEMS / (pb->N * pb->M * pb->D)) return bp;
        return every_level_plan(pb);
    }
    const int32_t max_adds = buffer_max_adds(mod, pb->dtype, strategy, half_sums);
    const uint32_t all = msda_all_levels(pb->L);
    if (pb->table_on_device) { /* the kernels plan from the table: room for any table */
        if (max_adds == 0 || msda_every_level_buffered(pb->L, pb->S, pb->Lq, pb->P, max_adds)) {
            bp.levels = all, bp.spatial = pb->S, bp.every_level = 1;
        } else {
            bp.spatial = msda_buffer_rows_bound(pb->L, pb->S, pb->Lq, pb->P, max_adds);
            bp.max_adds = bp.spatial ? max_adds : 0;
        }
        bp.half_sums = half_sums && !bp.every_level;
        return bp;
    }
    int64_t hw[MSDA_MAX_LEVELS], base[MSDA_MAX_LEVELS];
    for (int64_t l = 0; l < pb->L; l++) hw[l] = pb->level_h[l] * pb->level_w[l];
    bp.levels = msda_plan_levels(pb->L, hw, pb->Lq, pb->P, max_adds, pb->S);
    bp.spatial = msda_pack_levels(pb->L, hw, bp.levels, base);
    bp.every_level = bp.levels == all;
    bp.half_sums = half_sums && !bp.every_level;
    return bp;
}

/* The buffer's bytes (f32, or f16 replicas rounded up to 16 bytes), and the workspace's: the
 * buffer, then the half sums' bounds. */
static size_t buffer_bytes(const msda_problem *pb, const buffer_plan *bp) {
    const size_t elems = (size_t)(pb->N * bp->spatial * pb->M * pb->D);
    return bp->replica_adds > 0 ? (elems * 2 + 15) / 16 * 16 : elems * sizeof(float);
}
static size_t workspace_bytes(const msda_problem *pb, const buffer_plan *bp) {
    return (bp->half_sums ? HALF_SUMS_BOUND_BYTES : 0) + buffer_bytes(pb, bp);
}

/* The deterministic backward's workspace (msda_kernels.cu, exact_bounds): an int64 sum an
 * element, a 4-bit flag an element rounded up to 16 bytes, then the bounds. */
#define EXACT_BOUND_BYTES 32
static size_t exact_flag_bytes(const msda_problem *pb) { return ((size_t)pb->value_elems + 31) / 32 * 16; }
static size_t exact_workspace_bytes(const msda_problem *pb) {
    return (size_t)pb->value_elems * 8 + exact_flag_bytes(pb) + EXACT_BOUND_BYTES;
}

/* Whether the backward takes the exact-sums kernels: asked to (deterministic), or under discrete
 * sampling, which only those kernels compile (msda_kernels.cu, backward's DISCRETE_OK). */
static int exact_backward(const msda_problem *pb) { return pb->deterministic || pb->discrete; }

/* What the backward runs, for the call and for its workspace query alike. */
typedef struct backward_choice {
    int exact;          /* the deterministic kernels (exact_backward) */
    buffer_plan bp;     /* the others' buffer */
    int vec;            /* elements a lane; 0: no kernel fits, the call is staged */
    int64_t stage_D;    /* where staged: D rounded up to the narrowest vector that serves it */
    msda_kernel_id kid;
    int pairing;        /* msda_kparams.pair_exchange */
} backward_choice;

/* ptrs: value, grad_output, grad_value (the deterministic kernels read only the first two
 * with vectors: their rounding pass takes any grad_value). 16-bit lanes take 8 elements where
 * some levels add natively (one 16-byte 16-bit `red`; 8-byte ones measured far slower), with
 * lane pairs swapping halves so that the two f32 `red`s of the buffered levels fill whole
 * sectors, which needs one chunk per lane. With every level buffered, or no pairing, 4
 * elements: one f32 `red` beside its neighbours'; f32 coordinates, which have no such mixed
 * kernel, then take the all-buffer one, every level buffered. */
static backward_choice choose_backward(const msda_problem *pb, const msda_module *mod, const void *const *ptrs) {
    backward_choice c;
    memset(&c, 0, sizeof c);
    if (exact_backward(pb)) {
        const int vec = exact_vec(pb->dtype);
        c.exact = 1;
        c.kid = exact_kernels[pb->logits][pb->dtype];
        if (vec_fits(pb, vec, ptrs, 2)) c.vec = vec;
        else c.stage_D = round_up(pb->D, vec);
        return c;
    }
    c.bp = plan_buffer(pb, mod);
    /* The all-buffer kernels take either coordinate type: their width from the value's own row. */
    int coord_row = c.bp.every_level ? 0 : pb->coord_f32;
    const vec_kernels *v = pick_vec(pb, coord_row, c.bp.every_level ? ALL_BUFFER_VEC : 8, ptrs, 3);
    if (v && c.bp.spatial && v->vec == 8 && !c.bp.replica_adds) {
        const int64_t chunks = pb->D / 8;
        c.pairing = chunks >= 2 && chunks <= 32 && (chunks & (chunks - 1)) == 0;
        if (!c.pairing) v = pick_vec(pb, coord_row, 4, ptrs, 3);
        if (!c.pairing && !v && pb->coord_f32) {
            c.bp = every_level_plan(pb);
            coord_row = 0;
            v = pick_vec(pb, 0, ALL_BUFFER_VEC, ptrs, 3);
        }
    }
    if (!v) {
        c.stage_D = round_up(pb->D, c.bp.every_level ? ALL_BUFFER_VEC : narrowest_vec(pb, coord_row));
        return c;
    }
    c.vec = v->vec;
    c.kid = v->bwd;
    if (c.bp.every_level) /* the kernel without the native path (fewer registers) */
        c.kid = all_buffer_kernels[pb->logits][pb->dtype == MSDA_BF16];
    else if (c.bp.half_sums)
        c.kid = half_sum_kernels[pb->logits][pb->coord_f32][v - dtype_kernels[pb->logits][pb->dtype][pb->coord_f32]];
    return c;
}

static size_t choice_bytes(const msda_problem *pb, const backward_choice *c) {
    return c->exact ? exact_workspace_bytes(pb) : workspace_bytes(pb, &c->bp);
}

/* A staged backward (see staging): the staged args and problem, and its workspace: value,
 * grad_output and grad_value padded, then the staged call's own workspace. */
typedef struct staged_backward {
    msda_backward_args args;
    msda_problem pb;
    backward_choice inner; /* what the staged problem runs */
    size_t value_bytes, output_bytes, inner_bytes, bytes;
} staged_backward;

static msda_status stage_backward(const msda_backward_args *a, const msda_module *mod, int64_t D, staged_backward *sb,
                                  msda_error *err) {
    sb->args = *a;
    sb->args.sizes.channels = D;
    msda_status st = msda_check_backward(&sb->args, &sb->pb, err); /* the caller's pointers until the copies */
    if (st != MSDA_OK) return st;
    const size_t es = msda_dtype_size(sb->pb.dtype);
    sb->value_bytes = stage_round((size_t)sb->pb.value_elems * es);
    sb->output_bytes = stage_round((size_t)sb->pb.output_elems * es);
    const void *const copies[] = {NULL, NULL, NULL}; /* the copies are aligned */
    sb->inner = choose_backward(&sb->pb, mod, copies);
    if (!sb->inner.vec) return no_staged_kernel(err);
    sb->inner_bytes = choice_bytes(&sb->pb, &sb->inner);
    sb->bytes = 2 * sb->value_bytes + sb->output_bytes + sb->inner_bytes;
    return MSDA_OK;
}

msda_status msda_backward_cuda_workspace(const msda_backward_args *a, size_t *bytes, msda_error *err) {
    msda_problem pb;
    const msda_driver *drv;
    const msda_module *mod;
    if (!bytes) return msda_fail(err, MSDA_ERR_NULL_ARGUMENT, "bytes is NULL");
    msda_status st = msda_check_backward(a, &pb, err);
    if (st == MSDA_OK) st = prepare(&pb, &drv, &mod, err);
    if (st != MSDA_OK) return st;
    const void *const ptrs[] = {a->value, a->grad_output, a->grad_value};
    const backward_choice c = choose_backward(&pb, mod, ptrs);
    if (c.vec) {
        *bytes = choice_bytes(&pb, &c);
        return MSDA_OK;
    }
    staged_backward sb;
    st = stage_backward(a, mod, c.stage_D, &sb, err);
    if (st == MSDA_OK) *bytes = sb.bytes;
    return st;
}

/* A caller's workspace for a call that needs `bytes`: checked before anything is queued. */
static msda_status check_workspace(const msda_backward_args *a, size_t bytes, msda_error *err) {
    if (!bytes || !a->workspace || (a->workspace_bytes >= bytes && aligned(a->workspace, 16))) return MSDA_OK;
    return msda_fail(err, MSDA_ERR_BAD_ARGUMENT, "workspace: %zu bytes at %p, the call needs %zu bytes aligned to 16",
                     a->workspace_bytes, a->workspace, bytes);
}

/* The backward's launch layout, whichever kernel: queries spread over runs, heads in phases
 * (msda_kernels.cu, backward_place_of). */
static void backward_layout(const msda_problem *pb, const msda_module *mod, const msda_kernel *k,
                            msda_kparams *kp) {
    kp->spread_log2 = spread_log2(pb->Lq, mod->config.backward_spread_log2);
    /* a slot for each query of each run (backward_place_of), past Lq where runs are rounded up */
    kp->spread_run = (pb->Lq + ((int64_t)1 << kp->spread_log2) - 1) >> kp->spread_log2;
    kp->spread_slots = kp->spread_run << kp->spread_log2;
    kp->threads = (((pb->N * kp->spread_slots * pb->M) << kp->lanes_log2) + 31) / 32 * 32;
    kp->head_phases_log2 = head_phases_log2((kp->spread_slots * pb->M) << kp->lanes_log2,
                                            (int64_t)k->min_grid * k->block, (int32_t)pb->M,
                                            mod->config.backward_head_phases_log2);
}

static void set_backward_pointers(const msda_backward_args *a, msda_kparams *kp) {
    kp->value = (uint64_t)(uintptr_t)a->value;
    kp->locations = (uint64_t)(uintptr_t)a->sampling_locations;
    kp->weights = (uint64_t)(uintptr_t)a->attention_weights;
    kp->grad_output = (uint64_t)(uintptr_t)a->grad_output;
    kp->output = (uint64_t)(uintptr_t)a->grad_value;
    kp->grad_locations = (uint64_t)(uintptr_t)a->grad_sampling_locations;
    kp->grad_weights = (uint64_t)(uintptr_t)a->grad_attention_weights;
}

/* The deterministic backward: the workspace zeroed, the bounds, the backward adding exact
 * integer sums, then each element of grad_value rounded once from its sum (which writes all of
 * it: no zeroing of grad_value). */
static msda_status backward_exact(const msda_backward_args *a, const msda_problem *pb, const backward_choice *c,
                                  const msda_driver *drv, const msda_module *mod, CUstream stream, msda_error *err) {
    const msda_kernel *k = &mod->kernels[c->kid];
    const msda_kernel *bounds = &mod->kernels[exact_bounds_kernels[pb->dtype][pb->coord_f32]];
    const msda_kernel *finish = &mod->kernels[exact_finish_kernels[pb->dtype]];
    const msda_kernel *missing = !k->fn ? k : !bounds->fn ? bounds : !finish->fn ? finish : NULL;
    if (missing) return msda_fail(err, MSDA_ERR_DTYPE_NOT_BUILT, "the device code has no %s", missing->name);
    const size_t bytes = exact_workspace_bytes(pb);
    msda_status st = check_workspace(a, bytes, err);
    if (st != MSDA_OK) return st;
    msda_kparams kp;
    fill_params(pb, c->vec, a->spatial_shapes, a->level_start, a->device_status, &kp);
    set_backward_pointers(a, &kp);
    backward_layout(pb, mod, k, &kp);
    kp.weights_logits = pb->logits;

    workspace ws;
    st = workspace_take(a->workspace, drv, stream, bytes, &ws, err);
    if (st != MSDA_OK) return st;
    const CUdeviceptr buf = ws.ptr;
    kp.buffer = (uint64_t)buf;
    kp.half_sums = (uint64_t)(buf + (size_t)pb->value_elems * 8 + exact_flag_bytes(pb));
    const CUresult r = drv->MemsetD8Async(buf, 0, bytes, stream);
    if (r != CUDA_SUCCESS) st = msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "zeroing the backward's workspace");
    if (st == MSDA_OK) { /* over grad_output and the weights: at most a wave of blocks */
        const int64_t most = pb->output_elems > pb->weight_elems ? pb->output_elems : pb->weight_elems;
        const int64_t wave = (int64_t)bounds->min_grid * bounds->block;
        st = launch_threads(drv, bounds, &kp, most < wave ? most : wave, stream, err);
    }
    if (st == MSDA_OK) st = launch(drv, k, &kp, stream, err);
    if (st == MSDA_OK) { /* over grad_value's elements: at most a wave of blocks */
        msda_kparams cp = kp;
        cp.threads = pb->value_elems;
        const int64_t wave = (int64_t)finish->min_grid * finish->block;
        st = launch_threads(drv, finish, &cp, cp.threads < wave ? cp.threads : wave, stream, err);
    }
    return workspace_release(drv, stream, &ws, st, err);
}

static msda_status backward_staged(const msda_backward_args *a, const msda_problem *pb, int64_t D,
                                   const msda_driver *drv, const msda_module *mod, CUstream stream, msda_error *err);

/* The backward of a validated problem: the caller's, or a staged copy with the choice staging
 * made for it (`staged`, which a kernel fits). */
static msda_status backward_run(const msda_backward_args *a, const msda_problem *problem, const msda_driver *drv,
                                const msda_module *mod, CUstream stream, const backward_choice *staged,
                                msda_error *err) {
    const void *const ptrs[] = {a->value, a->grad_output, a->grad_value};
    const backward_choice c = staged ? *staged : choose_backward(problem, mod, ptrs);
    if (!c.vec) return backward_staged(a, problem, c.stage_D, drv, mod, stream, err);
    if (c.exact) return backward_exact(a, problem, &c, drv, mod, stream, err);
    const msda_problem pb = *problem;
    const buffer_plan bp = c.bp;
    const msda_kernel *k = &mod->kernels[c.kid];
    if (!k->fn) return msda_fail(err, MSDA_ERR_DTYPE_NOT_BUILT, "the device code has no %s", k->name);
    msda_kparams kp;
    fill_params(&pb, c.vec, a->spatial_shapes, a->level_start, a->device_status, &kp);
    set_backward_pointers(a, &kp);
    backward_layout(&pb, mod, k, &kp);

    const size_t bytes = workspace_bytes(&pb, &bp);
    msda_status st = check_workspace(a, bytes, err);
    if (st != MSDA_OK) return st;
    /* Under replicas with the table on the device, one kernel zeroes grad_value and what the
     * table's plan fills of the workspace (msda_kernels.cu, zero_backward); else memsets. */
    const int zero_kernel = bp.replica_adds > 0 && pb.table_on_device && (bp.spatial || bp.half_sums);
    CUresult r;
    if (!bp.every_level && !zero_kernel) { /* native levels add to it; the conversion writes only its own */
        r = drv->MemsetD8Async((CUdeviceptr)(uintptr_t)a->grad_value, 0,
                               (size_t)pb.value_elems * msda_dtype_size(pb.dtype), stream);
        if (r != CUDA_SUCCESS) return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "zeroing grad_value");
    }
    if (!bp.spatial && !bp.half_sums) return launch(drv, k, &kp, stream, err);

    /* Some levels summed in an f32 buffer, then rounded once into grad_value, or in f16
     * replicas, then added up into it (f16: a gather after the backward; bf16: in the pass that
     * rounds the half sums). Under half sums the bounds come first, and the other levels' scaled
     * f16 sums are rounded to bf16 in place before any conversion. */
    const int gather = bp.spatial && bp.replica_adds && pb.dtype == MSDA_F16;
    const int convert = bp.spatial && !bp.replica_adds;
    const msda_kernel *conv = &mod->kernels[gather ? K_GATHER_F16 : pb.dtype == MSDA_F16 ? K_CONVERT_F16 : K_CONVERT_BF16];
    const msda_kernel *bounds = &mod->kernels[pb.coord_f32 ? K_HALF_BOUNDS_BF16C32 : K_HALF_BOUNDS_BF16];
    const msda_kernel *finish = &mod->kernels[K_FINISH_HALF_BF16];
    const msda_kernel *zero = &mod->kernels[pb.dtype == MSDA_F16 ? K_ZERO_F16 : K_ZERO_BF16];
    const msda_kernel *missing = (gather || convert) && !conv->fn ? conv
                                 : zero_kernel && !zero->fn       ? zero
                                 : bp.half_sums && !bounds->fn    ? bounds
                                 : bp.half_sums && !finish->fn    ? finish
                                                                  : NULL;
    if (missing) return msda_fail(err, MSDA_ERR_DTYPE_NOT_BUILT, "the device code has no %s", missing->name);
    workspace ws;
    st = workspace_take(a->workspace, drv, stream, bytes, &ws, err);
    if (st != MSDA_OK) return st;
    const CUdeviceptr buf = ws.ptr;
    kp.buffer = bp.spatial ? (uint64_t)buf : 0;
    kp.buffer_spatial = bp.spatial;
    kp.buffer_levels = bp.levels;
    kp.buffer_max_adds = bp.max_adds;
    kp.replica_adds = bp.replica_adds;
    kp.pair_exchange = c.pairing;
    kp.half_sums = bp.half_sums ? (uint64_t)(buf + buffer_bytes(&pb, &bp)) : 0;
    const int64_t row = pb.M * pb.D;
    if (zero_kernel) { /* grad_value, the replicas' rows that the table's plan fills, the bounds */
        msda_kparams zp = kp;
        zp.threads = pb.value_elems;
        zp.chunks = row % 8 == 0 ? 8 : 1;
        const int64_t values = (pb.value_elems + 7) / 8, replicas = pb.N * bp.spatial * row / zp.chunks;
        const int64_t vectors = values > replicas ? values : replicas, wave = (int64_t)zero->min_grid * zero->block;
        st = launch_threads(drv, zero, &zp, vectors < wave ? vectors : wave, stream, err);
    } else {
        r = drv->MemsetD8Async(buf, 0, bytes, stream);
        if (r != CUDA_SUCCESS) st = msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "zeroing the backward's workspace");
    }
    /* The bounds and the rounding loop over their elements: at most a wave of blocks each. */
    if (st == MSDA_OK && bp.half_sums) {
        msda_kparams hp = kp;
        if (pb.logits) hp.weights = 0; /* softmaxed: at most 1 */
        const int64_t vectors = (pb.N * pb.Lq * pb.M * pb.D + 7) / 8, wave = (int64_t)bounds->min_grid * bounds->block;
        st = launch_threads(drv, bounds, &hp, vectors < wave ? vectors : wave, stream, err);
    }
    if (st == MSDA_OK) st = launch(drv, k, &kp, stream, err);
    /* The passes after the backward, on its table and plan: the rounding in place (under
     * replicas with the gather), then any conversion or gather. */
    msda_kparams cp;
    fill_params(&pb, 1, a->spatial_shapes, a->level_start, a->device_status, &cp);
    cp.output = (uint64_t)(uintptr_t)a->grad_value;
    cp.half_sums = kp.half_sums;
    cp.buffer = kp.buffer;
    cp.buffer_spatial = bp.spatial;
    cp.buffer_levels = bp.levels;
    cp.buffer_max_adds = bp.max_adds;
    cp.replica_adds = bp.replica_adds;
    if (st == MSDA_OK && bp.half_sums) {
        cp.threads = pb.value_elems;
        const int64_t wave = (int64_t)finish->min_grid * finish->block;
        if (bp.replica_adds) { /* a row of blocks a batch element: a wave in all */
            cp.chunks = row % 8 == 0 && aligned(a->grad_value, 16) ? 8 : 1;
            const int64_t rows = pb.N < 65535 ? pb.N : 65535, per_n = pb.S * row / cp.chunks;
            const int64_t share = wave / rows > finish->block ? wave / rows : finish->block;
            st = launch_rows(drv, finish, &cp, per_n < share ? per_n : share, rows, stream, err);
        } else {
            const int64_t vectors = (pb.value_elems + 7) / 8;
            st = launch_threads(drv, finish, &cp, vectors < wave ? vectors : wave, stream, err);
        }
    }
    if (st == MSDA_OK && (gather || convert)) {
        /* Vectors of 8 or 4 never straddle an n (M * D is a multiple), and land aligned. */
        cp.chunks = row % 8 == 0 && aligned(a->grad_value, 16) ? 8 : row % 4 == 0 && aligned(a->grad_value, 8) ? 4 : 1;
        if (gather) { /* the gather loops over what its plan finds: at most a wave */
            const int64_t vectors = (pb.N * bp.positions * row + cp.chunks - 1) / cp.chunks;
            const int64_t wave = (int64_t)conv->min_grid * conv->block;
            st = launch_threads(drv, conv, &cp, vectors < wave ? vectors : wave, stream, err);
        } else {
            cp.threads = (int64_t)(buffer_bytes(&pb, &bp) / sizeof(float));
            st = launch_threads(drv, conv, &cp, (cp.threads + cp.chunks - 1) / cp.chunks, stream, err);
        }
    }
    return workspace_release(drv, stream, &ws, st, err);
}

msda_status msda_backward_cuda(const msda_backward_args *a, void *stream, msda_error *err) {
    msda_problem pb;
    const msda_driver *drv;
    const msda_module *mod;
    msda_status st = msda_check_backward(a, &pb, err);
    if (st == MSDA_OK) st = prepare(&pb, &drv, &mod, err);
    return st == MSDA_OK ? backward_run(a, &pb, drv, mod, (CUstream)stream, NULL, err) : st;
}

/* The staged calls (see staging): the copies padded in, the staged problem run, the results
 * taken back out, all on the call's stream. */
static msda_status forward_staged(const msda_forward_args *a, const msda_problem *pb, const msda_driver *drv,
                                  const msda_module *mod, CUstream stream, msda_error *err) {
    msda_forward_args sa;
    msda_problem sp;
    msda_status st = stage_problem_forward(a, narrowest_vec(pb, pb->coord_f32), &sa, &sp, err);
    if (st != MSDA_OK) return st;
    const size_t es = msda_dtype_size(pb->dtype), value_bytes = stage_round((size_t)sp.value_elems * es);
    workspace ws;
    st = workspace_take(NULL, drv, stream, value_bytes + (size_t)sp.output_elems * es, &ws, err);
    if (st != MSDA_OK) return st;
    sa.value = (const void *)(uintptr_t)ws.ptr;
    sa.output = (void *)(uintptr_t)(ws.ptr + value_bytes);
    st = restride(drv, mod, pb, ws.ptr, sp.D, a->value, pb->D, pb->N * pb->S * pb->M, stream, err);
    if (st == MSDA_OK) st = forward_run(&sa, &sp, drv, mod, stream, 1, err);
    if (st == MSDA_OK)
        st = restride(drv, mod, pb, (CUdeviceptr)(uintptr_t)a->output, pb->D, sa.output, sp.D, pb->N * pb->Lq * pb->M,
                      stream, err);
    return workspace_release(drv, stream, &ws, st, err);
}

static msda_status backward_staged(const msda_backward_args *a, const msda_problem *pb, int64_t D,
                                   const msda_driver *drv, const msda_module *mod, CUstream stream, msda_error *err) {
    staged_backward sb;
    msda_status st = stage_backward(a, mod, D, &sb, err);
    if (st == MSDA_OK) st = check_workspace(a, sb.bytes, err);
    if (st != MSDA_OK) return st;
    workspace ws;
    st = workspace_take(a->workspace, drv, stream, sb.bytes, &ws, err);
    if (st != MSDA_OK) return st;
    const CUdeviceptr value = ws.ptr, grad_output = value + sb.value_bytes, grad_value = grad_output + sb.output_bytes;
    sb.args.value = (const void *)(uintptr_t)value;
    sb.args.grad_output = (const void *)(uintptr_t)grad_output;
    sb.args.grad_value = (void *)(uintptr_t)grad_value;
    sb.args.workspace = sb.inner_bytes ? (void *)(uintptr_t)(grad_value + sb.value_bytes) : NULL;
    sb.args.workspace_bytes = sb.inner_bytes;
    const int64_t value_rows = pb->N * pb->S * pb->M;
    st = restride(drv, mod, pb, value, D, a->value, pb->D, value_rows, stream, err);
    if (st == MSDA_OK) st = restride(drv, mod, pb, grad_output, D, a->grad_output, pb->D, pb->N * pb->Lq * pb->M, stream, err);
    if (st == MSDA_OK) st = backward_run(&sb.args, &sb.pb, drv, mod, stream, &sb.inner, err);
    if (st == MSDA_OK) st = restride(drv, mod, pb, (CUdeviceptr)(uintptr_t)a->grad_value, pb->D, sb.args.grad_value, D, value_rows, stream, err);
    return workspace_release(drv, stream, &ws, st, err);
}
