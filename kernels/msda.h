/* libmsda: Multi-Scale Deformable Attention (Deformable-DETR's MSDeformAttn op) as a C library.
 *
 * The function (docs/DESIGN.md, "The MSDA op"):
 *
 *   value               (N, S, M, D)          S = sum over levels of H_l * W_l
 *   spatial_shapes      (L, 2)  rows (H_l, W_l)
 *   level_start         (L,)    level_start[l] = sum of H_k * W_k for k < l
 *   sampling_locations  (N, Lq, M, L, P, 2)  normalised (x, y), nominally in [0, 1]
 *   attention_weights   (N, Lq, M, L, P)
 *   output              (N, Lq, M * D)
 *
 *   output[n, q, m*D + d] = sum over l, p of attention_weights[n, q, m, l, p] *
 *       bilinear(value[n, level_start[l] + ., m, d], h = y * H_l - 0.5, w = x * W_l - 0.5)
 *
 * Bilinear sampling uses align_corners=False and zero padding: a corner outside the map
 * contributes zero, and a point with h <= -1, w <= -1, h >= H_l or w >= W_l (NaN and infinite
 * locations included) contributes zero to the output and gets zero gradients. The backward
 * gives the gradients of a scalar loss with respect to value, sampling_locations and
 * attention_weights, given its gradient with respect to output.
 *
 * All tensors are dense and row-major in the shapes above. value, grad_output, output and
 * grad_value are in the args' `dtype`; sampling_locations, attention_weights and their gradients
 * are in the same type, or in f32 with an f16 or bf16 value (`coord_type`, mixed precision as
 * autocast gives it: the locations are never rounded to 16 bits). f16 and bf16 are passed as
 * their 16-bit patterns (IEEE binary16, bfloat16) and computed in f32. Any element-aligned
 * address and any D are correct. The CUDA kernels take vectors of 8 or 16 bytes a lane (16
 * where D allows); where D is not a multiple of the narrowest (f32 4 elements, f64 2, f16 and
 * bf16 4, or 8 with f32 coordinates) or value, output, grad_output or grad_value does not start
 * on its boundary, the call runs on copies padded to that multiple ("staged"): device memory of
 * the call's own in the forward (allocated stream-ordered where the driver can), part of the
 * workspace in the backward (msda_backward_cuda_workspace counts it). The forward's fast path
 * also needs each point's x and y aligned as a pair: the Python package copies such a value,
 * grad_output or sampling_locations first.
 *
 * The level table (spatial_shapes, level_start) is in host memory, or, for the CUDA path, in
 * device memory (`level_table`), as models keep it: then no call copies it to the host or
 * synchronises. The host checks everything the table is not needed for; the kernels check the
 * table itself (H, W from 1 to 2^31 - 1, starts the prefix sums of H*W, their sum S) before any
 * access, and where it is inconsistent they index nothing, write NaN to the output (forward) or
 * to the location and weight gradients (backward, the value gradient stays zero), and store the
 * status (MSDA_ERR_BAD_SHAPE, _LEVEL_START or _SHAPE_SUM, as the host check would give) in
 * `device_status` when the caller passed one.
 *
 * Two paths compute the same function:
 *   msda_forward_cuda / msda_backward_cuda: device pointers, launched on the caller's stream in
 *     the caller's current CUDA context (driver API). libcuda.so.1 is opened at first use, so the
 *     library loads and its CPU path works where no driver is installed.
 *   msda_forward_cpu / msda_backward_cpu: host pointers, multithreaded, the reference for the
 *     GPU tests and the fallback where there is no GPU.
 *
 * Every function returns a status; none prints, exits or aborts. Where a call fails and `err`
 * is not NULL, it is filled with the status, a message, and for CUDA failures the CUresult with
 * its name and message. The library is thread-safe.
 *
 * Compile-time knobs of the device code, set per architecture by `msda-doctor build` from
 * kernels/libmsda.json (required; see kernels/README.md):
 *   MSDA_MAX_THREADS     the max threads per block in __launch_bounds__
 *   MSDA_ENABLE_F16      1 or 0: compile the f16 kernels
 *   MSDA_ENABLE_BF16     1 or 0: compile the bf16 kernels
 *   MSDA_F16_ATOMIC      how the f16 backward accumulates the value gradient:
 *   MSDA_BF16_ATOMIC       1 native atomics, 2 compare-and-swap, 3 f32 buffer, 4 mixed (native
 *                          on levels with few additions per element, else the f32 buffer).
 *                          Strategies 3 and 4 use a workspace: see
 *                          msda_backward_cuda_workspace.
 *   MSDA_VECTOR_ATOMICS  1 (default) or 0: 16-byte red/atomic instructions on sm_90 and newer
 *   MSDA_F16_REPLICA_ADDS, MSDA_BF16_REPLICA_ADDS  0 or N: the mixed strategy's coarse levels in
 *                        f16 replicas of at most about N adds an element rather than the f32
 *                        buffer (default 128 and 32 on sm_90 and newer, else 0)
 *   MSDA_BUFFER_MIN_BLOCKS  min blocks per SM of the all-buffer 16-bit backward (default
 *                        1024 / MSDA_MAX_THREADS, i.e. at most 64 registers)
 */
#ifndef MSDA_H
#define MSDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MSDA_API __attribute__((visibility("default")))
#else
#define MSDA_API
#endif

/* At most this many levels (L). */
#define MSDA_MAX_LEVELS 16

/* The layout of the argument structs and the meaning of their fields. Raised whenever either
 * changes, never reused; msda_abi_version() gives the library's, which a caller that binds at
 * run time (ctypes, dlopen) compares with the one it was written for.
 *   1: the first (the three args structs without coord_type, level_table, device_status)
 *   2: coord_type, level_table and device_status appended to both args structs
 *   3: weights appended to both args structs (attention weights as logits: the fused softmax)
 *   4: deterministic appended to msda_backward_args
 *   5: level_points and sampling appended to both args structs (a point count per level, the
 *      discrete sampling of RT-DETR v2 and D-FINE) */
#define MSDA_ABI_VERSION 5

typedef enum msda_dtype {
    MSDA_F32 = 0,
    MSDA_F64 = 1,
    MSDA_F16 = 2,  /* uint16_t IEEE binary16 patterns */
    MSDA_BF16 = 3, /* uint16_t bfloat16 patterns */
} msda_dtype;

/* The data type of sampling_locations, attention_weights and their gradients. */
typedef enum msda_coord_type {
    MSDA_COORD_SAME = 0, /* the args' dtype, as value's */
    MSDA_COORD_F32 = 1,  /* f32, with dtype f16, bf16 (or f32) */
} msda_coord_type;

/* What attention_weights holds. With MSDA_WEIGHTS_LOGITS the op applies the softmax over the
 * L*P logits of each (n, q, m) itself (as Deformable-DETR does before calling the op) and uses
 *   w[n, q, m, lp] = exp(x[lp] - max_k x[k]) / sum_k exp(x[k] - max_k x[k])
 * in place of attention_weights in the formula above. The softmax is computed in the
 * accumulation type (f32 for f16 and bf16, f64 for f64) from the stored logits. A group (row)
 * gives what torch.softmax gives on the same row: a NaN logit, a +inf logit, or every logit
 * -inf makes its w NaN (NaN in, NaN out), and a NaN w is then used like a NaN attention weight
 * (it reaches the output through every point inside the map). The backward writes, in
 * grad_attention_weights, the gradient with respect to the logits:
 *   grad_x[lp] = w[lp] * (g[lp] - sum_k w[k] * g[k])
 * where g is the gradient with respect to w (what MSDA_WEIGHTS_SOFTMAXED writes there). The CUDA
 * path keeps g - g[0] in grad_attention_weights' own type before that step, so with 16-bit
 * coordinates that difference is rounded to 16 bits first; the CPU path keeps g unrounded. */
typedef enum msda_weights {
    MSDA_WEIGHTS_SOFTMAXED = 0, /* attention_weights are used as given (ABI 1 and 2) */
    MSDA_WEIGHTS_LOGITS = 1,    /* attention_weights are logits: the softmax is fused */
} msda_weights;

/* How a point samples its level (ABI 5).
 *
 * MSDA_SAMPLING_DISCRETE takes the nearest pixel, as RT-DETR v2's and D-FINE's "discrete" method
 * does: with f = x * W_l + 0.5 (a multiplication and an addition, each rounded, in the
 * accumulation type: f32 for f16, bf16 and f32 values, f64 for f64), the column is
 * ix = trunc(f) clamped to [0, W_l - 1], the row likewise from y and H_l, and the sample is
 * value[n, level_start[l] + iy * W_l + ix, m, d] with weight 1. Every location lands in the map
 * (infinite ones at its edge) but a NaN one, which contributes nothing. The backward gives
 * grad_value and grad_attention_weights of that sample, and zero grad_sampling_locations (the
 * sample is constant between pixel edges); on the CUDA path it is always the deterministic
 * backward (msda_backward_args.deterministic: the same bits on every run, and its workspace). */
typedef enum msda_sampling {
    MSDA_SAMPLING_BILINEAR = 0, /* the formula above (ABI 1 to 4) */
    MSDA_SAMPLING_DISCRETE = 1, /* the nearest pixel, clamped into the map */
} msda_sampling;

/* Where the level table (spatial_shapes, level_start) is. */
typedef enum msda_memory {
    MSDA_HOST = 0,
    MSDA_DEVICE = 1, /* device memory of the current context: CUDA path only */
} msda_memory;

/* Values are stable: never renumbered. */
typedef enum msda_status {
    MSDA_OK = 0,
    MSDA_ERR_NULL_ARGUMENT = 1,    /* a required pointer is NULL */
    MSDA_ERR_BAD_DTYPE = 2,        /* not one of msda_dtype, or a coord_type it does not go with */
    MSDA_ERR_BAD_SIZE = 3,         /* N, S, M, D, Lq, L, P or a level's points is not positive,
                                      or too large, or P is not the largest level's points */
    MSDA_ERR_TOO_MANY_LEVELS = 4,  /* L > MSDA_MAX_LEVELS */
    MSDA_ERR_BAD_SHAPE = 5,        /* a level's H or W is not positive, or too large */
    MSDA_ERR_SHAPE_SUM = 6,        /* the sum of H_l * W_l differs from S */
    MSDA_ERR_LEVEL_START = 7,      /* level_start differs from the prefix sums of H_l * W_l */
    MSDA_ERR_SIZE_OVERFLOW = 8,    /* a tensor's element count overflows 64-bit indexing */
    MSDA_ERR_NO_DRIVER = 9,        /* libcuda.so.1 could not be opened */
    MSDA_ERR_DRIVER_TOO_OLD = 10,  /* libcuda.so.1 lacks an entry point the library needs */
    MSDA_ERR_NO_CONTEXT = 11,      /* the calling thread has no current CUDA context */
    MSDA_ERR_NO_KERNEL_IMAGE = 12, /* no embedded device code loads on this device */
    MSDA_ERR_DTYPE_NOT_BUILT = 13, /* the loaded device code was built without this dtype */
    MSDA_ERR_CUDA = 14,            /* a CUDA driver call failed: see msda_error */
    MSDA_ERR_OUT_OF_MEMORY = 15,   /* a host allocation failed */
    MSDA_ERR_TOO_MANY_CONTEXTS = 16, /* more CUDA contexts than the module cache holds */
    MSDA_ERR_BAD_ARGUMENT = 17,    /* another invalid argument (e.g. a negative thread count) */
} msda_status;

#define MSDA_STATUS_COUNT 18

/* Details of a failure. Filled only when a call fails and the pointer is not NULL. */
typedef struct msda_error {
    msda_status status;
    int cuda_result;        /* the CUresult where status is a CUDA failure, else 0 */
    char cuda_name[64];     /* e.g. "CUDA_ERROR_NO_BINARY_FOR_GPU", else "" */
    char message[320];      /* one line: what failed and why */
} msda_error;

/* The sizes. All must be positive. */
typedef struct msda_sizes {
    int64_t batch;    /* N */
    int64_t spatial;  /* S, the sum of H_l * W_l */
    int64_t heads;    /* M */
    int64_t channels; /* D, channels per head */
    int64_t queries;  /* Lq */
    int64_t levels;   /* L, 1 to MSDA_MAX_LEVELS */
    int64_t points;   /* P, sampling points per level; with level_points, the largest P_l */
} msda_sizes;

/* Forward arguments. spatial_shapes (L rows of H, W) and level_start (L) are int64, in host
 * memory unless level_table says MSDA_DEVICE. The four tensors are device pointers for the
 * CUDA path and host pointers for the CPU path. The fields after `output` (ABI 2) are zero for
 * the behaviour of ABI 1: coordinates in dtype, the table on the host, no device status. */
typedef struct msda_forward_args {
    msda_dtype dtype;
    msda_sizes sizes;
    const int64_t *spatial_shapes;
    const int64_t *level_start;
    const void *value;
    const void *sampling_locations;
    const void *attention_weights;
    void *output; /* written entirely */
    msda_coord_type coord_type; /* type of sampling_locations and attention_weights */
    msda_memory level_table;    /* where spatial_shapes and level_start are */
    /* CUDA path with the table on the device, optional: one int32 of device memory where the
     * kernels store the status of an inconsistent table (never cleared by the library). */
    int32_t *device_status;
    msda_weights weights; /* ABI 3; zero: attention_weights are already softmaxed */
    /* ABI 5, optional, host memory: level l has level_points[l] points (1 to sizes.points, the
     * largest equal to sizes.points), so that sampling_locations is (N, Lq, M, sum P_l, 2) and
     * attention_weights (N, Lq, M, sum P_l), the points level by level (RT-DETR v2's
     * num_points_list). The softmax of MSDA_WEIGHTS_LOGITS is over the sum P_l of a group.
     * NULL: sizes.points on every level. */
    const int64_t *level_points;
    msda_sampling sampling; /* ABI 5; zero: bilinear */
} msda_forward_args;

/* Backward arguments: as the forward's, with grad_output in, and the three gradients out.
 * Each gradient is written entirely (grad_value is zeroed by the call first). grad_output and
 * grad_value are in dtype, grad_sampling_locations and grad_attention_weights in the type
 * coord_type gives. */
typedef struct msda_backward_args {
    msda_dtype dtype;
    msda_sizes sizes;
    const int64_t *spatial_shapes;
    const int64_t *level_start;
    const void *value;
    const void *sampling_locations;
    const void *attention_weights;
    const void *grad_output;
    void *grad_value;
    void *grad_sampling_locations;
    void *grad_attention_weights;
    /* CUDA path, optional: device memory of at least msda_backward_cuda_workspace() bytes that
     * the call's work may use until the stream passes it (e.g. from the caller's caching
     * allocator). NULL: where a workspace is needed, the call allocates and frees one itself,
     * stream-ordered where the driver can (cuMemAllocAsync), which is slower. Ignored by the
     * CPU path. */
    void *workspace;
    size_t workspace_bytes;
    msda_coord_type coord_type; /* as msda_forward_args' (ABI 2) */
    msda_memory level_table;
    int32_t *device_status;
    msda_weights weights; /* as msda_forward_args' (ABI 3); with MSDA_WEIGHTS_LOGITS,
                             grad_attention_weights is the gradient of the logits */
    /* ABI 4, 0 or 1. 1: the CUDA path gives the same grad_value bits on every run. It sums
     * grad_value's adds as 64-bit integers at a scale set by the call's largest finite
     * |grad_output| and |attention weight|, whose sums do not depend on their order, then
     * rounds each element once to dtype; an add that is inf or NaN (grad_output or weights
     * holding one) makes its element inf or NaN as the IEEE sum would. The workspace is larger
     * (msda_backward_cuda_workspace) and the call slower than with 0, whose atomics add in an
     * order that changes from run to run. The CPU path is deterministic either way. */
    int32_t deterministic;
    const int64_t *level_points; /* ABI 5: as msda_forward_args' */
    msda_sampling sampling;
} msda_backward_args;

/* The message for a status: a static string, never NULL ("unknown status" if out of range). */
MSDA_API const char *msda_status_string(msda_status status);

/* The library's version: the project's VERSION, which the build passes as MSDA_VERSION_STRING. */
MSDA_API const char *msda_version(void);

/* MSDA_ABI_VERSION as the library was built with it. */
MSDA_API int msda_abi_version(void);

/* Checks sizes, data types, the level table and pointers, as both paths do before any work. A
 * table in device memory is not read here (the kernels check it, see above). */
MSDA_API msda_status msda_validate_forward(const msda_forward_args *args, msda_error *err);
MSDA_API msda_status msda_validate_backward(const msda_backward_args *args, msda_error *err);

/* CPU path. `threads`: 0 uses one thread per CPU the process may run on (its affinity), else
 * at most that many. Returns
 * MSDA_OK or a validation status (MSDA_ERR_BAD_ARGUMENT for a table in device memory), or
 * MSDA_ERR_OUT_OF_MEMORY. The result does not depend on the
 * thread count (work is split so that no two threads write the same element). */
MSDA_API msda_status msda_forward_cpu(const msda_forward_args *args, int threads, msda_error *err);
MSDA_API msda_status msda_backward_cpu(const msda_backward_args *args, int threads,
                                       msda_error *err);

/* CUDA path. `stream` is a CUstream of the current context (NULL: the legacy default stream).
 * The call is asynchronous: it validates, loads the device code for the current context on its
 * first use there, and enqueues the work. A returned MSDA_OK means the launches were accepted;
 * errors of the running kernels surface at the caller's next synchronisation, as in CUDA.
 * The backward adds into grad_value with atomics, in an order that differs from run to run, so
 * its last bits may too, unless args->deterministic is 1; the other results, and the CPU path's,
 * are the same on every run. */
MSDA_API msda_status msda_forward_cuda(const msda_forward_args *args, void *stream,
                                       msda_error *err);
MSDA_API msda_status msda_backward_cuda(const msda_backward_args *args, void *stream,
                                        msda_error *err);

/* Sets *bytes to the device workspace msda_backward_cuda wants for these arguments in the
 * current context: where the loaded device code sums part of this dtype's value gradient apart
 * (f16 and bf16 by default), the f32 buffer of the buffered levels (MSDA_*_ATOMIC=3 or 4: up to
 * N*S*M*D*4) or their f16 replicas (MSDA_*_REPLICA_ADDS, sm_90: N*M*D*2 a replica row,
 * msda_plan.h), with the table on the device what any table of these sizes can need, and 16
 * bytes more under bf16's half sums; else 0. With `deterministic`, N*S*M*D*8.5 bytes and 32 more
 * (the integer sums, a 4-bit flag an element for inf and NaN adds, their bounds), rounded to
 * 16. Where the call is staged (D or a pointer no vector fits, above), the padded copies of
 * value, grad_output and grad_value first, each rounded up to 256 bytes, then what the staged
 * problem needs. The pointers count: ask with the ones the call will pass. Validates and loads
 * like the call. */
MSDA_API msda_status msda_backward_cuda_workspace(const msda_backward_args *args, size_t *bytes,
                                                  msda_error *err);

/* Loads the device code into the current context now (else the first call does). */
MSDA_API msda_status msda_cuda_prepare(msda_error *err);

/* Which embedded fatbin the current context loaded (loading it now if need be), as an index
 * into the table that msda_embedded_archs reports: what a device actually runs. */
MSDA_API msda_status msda_cuda_loaded_fatbin(int *index, msda_error *err);

/* One code image embedded in the library. */
typedef struct msda_arch {
    int arch;        /* e.g. 90 for sm_90 or compute_90 */
    int is_ptx;      /* 1: PTX (compute_XX, JIT-compiled by the driver), 0: SASS (sm_XX) */
    int fatbin;      /* index of the embedded fatbin that carries it */
} msda_arch;

/* Number of embedded fatbins (the loader tries them in order and keeps the first that loads). */
MSDA_API int msda_fatbin_count(void);

/* Lists the code images of the embedded fatbins, in the order found: one per architecture and
 * kind within a fatbin, so an architecture two toolkits wrote (sm_90 from CUDA 13.0 and from
 * 11.8) appears once per fatbin. Writes at most `cap` entries to `out` (which may be NULL when
 * cap is 0) and returns how many there are in all, or -1 if an embedded fatbin is malformed. */
MSDA_API int msda_embedded_archs(msda_arch *out, int cap);

/* The same as text, each architecture and kind named once, e.g. "sm_75 sm_80 ... compute_121",
 * NUL-terminated and truncated to fit
 * `size`. Returns the length the whole text needs (as snprintf), or -1 if malformed. */
MSDA_API int msda_embedded_archs_string(char *buf, size_t size);

/* What embedded fatbin `index` is and what it needs of the driver, e.g. "CUDA 11.8 SASS, driver
 * CUDA >= 11.0" or "PTX ISA 6.5, driver CUDA >= 10.2": the loader passes over a fatbin whose
 * driver is older. Returns the length the whole text needs (as snprintf), or -1 for an index
 * out of range. */
MSDA_API int msda_fatbin_describe(int index, char *buf, size_t size);

/* The kind of embedded fatbin `index` as MSDA_IMAGE names it: "sass:11.8" (SASS by the toolkit
 * that wrote it) or "ptx:6.5" (PTX by ISA). Setting MSDA_IMAGE to it before a context's first
 * call makes that context load only fatbins of this kind. Returns as msda_fatbin_describe. */
MSDA_API int msda_fatbin_key(int index, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* MSDA_H */
