/* The device code loaded per CUDA context: one module per part (msda_parts.h), its kernels and
 * their launch sizes. */
#ifndef MSDA_MODULE_H
#define MSDA_MODULE_H

#include "msda_driver.h"
#include "msda_kparams.h"
#include "msda_parts.h"

/* Kernels by data type, direction and vector width; see msda_kernels.cu. C32: f32 coordinates
 * beside a 16-bit value, in kernels of their own for 8 elements a lane; the all-buffer and
 * deterministic ones of a 16-bit value take either type (msda_kparams.coord_f32). */
typedef enum msda_kernel_id {
    K_FWD_F32_V4, K_BWD_F32_V4,
    K_FWD_F64_V2, K_BWD_F64_V2,
    K_FWD_F16_V8, K_FWD_F16_V4, K_BWD_F16_V8, K_BWD_F16_V4,
    K_FWD_BF16_V8, K_FWD_BF16_V4, K_BWD_BF16_V8, K_BWD_BF16_V4,
    K_CONVERT_F16, K_CONVERT_BF16,
    K_BWDBUF_F16_V4, K_BWDBUF_BF16_V4, /* every level buffered */
    K_FWD_F16C32_V8, K_BWD_F16C32_V8,
    K_FWD_BF16C32_V8, K_BWD_BF16C32_V8,
    /* The fused-softmax twins of the above (attention weights as logits): S for softmax. */
    K_SFWD_F32_V4, K_SBWD_F32_V4,
    K_SFWD_F64_V2, K_SBWD_F64_V2,
    K_SFWD_F16_V8, K_SFWD_F16_V4, K_SBWD_F16_V8, K_SBWD_F16_V4,
    K_SFWD_BF16_V8, K_SFWD_BF16_V4, K_SBWD_BF16_V8, K_SBWD_BF16_V4,
    K_SBWDBUF_F16_V4, K_SBWDBUF_BF16_V4,
    K_SFWD_F16C32_V8, K_SBWD_F16C32_V8,
    K_SFWD_BF16C32_V8, K_SBWD_BF16C32_V8,
    /* bf16's half sums (msda_device.cuh, MSDA_BF16_HALF_SUMS): the backward, plain and fused
     * (S), the bounds that set their scale (by the weights' type), and the rounding in place
     * (with the replicas' gather where there are replicas). */
    K_BWDHALF_BF16_V8, K_BWDHALF_BF16_V4, K_BWDHALF_BF16C32_V8,
    K_SBWDHALF_BF16_V8, K_SBWDHALF_BF16_V4, K_SBWDHALF_BF16C32_V8,
    K_HALF_BOUNDS_BF16, K_HALF_BOUNDS_BF16C32, K_FINISH_HALF_BF16,
    /* f16 replicas (msda_plan.h): their rows zeroed with grad_value before the backward, and
     * f16's added up into grad_value after it (bf16's by K_FINISH_HALF_BF16). */
    K_GATHER_F16, K_ZERO_F16, K_ZERO_BF16,
    /* The deterministic backward (msda.h, `deterministic`): X for exact sums, plain and fused
     * (S), the bounds that set their scale (by grad_output's type and the weights'), and the
     * rounding into grad_value. */
    K_BWDX_F32_V4, K_BWDX_F64_V2,
    K_BWDX_F16_V4, K_BWDX_BF16_V4,
    K_SBWDX_F32_V4, K_SBWDX_F64_V2,
    K_SBWDX_F16_V4, K_SBWDX_BF16_V4,
    K_XBOUNDS_F32, K_XBOUNDS_F64, K_XBOUNDS_F16, K_XBOUNDS_F16C32, K_XBOUNDS_BF16, K_XBOUNDS_BF16C32,
    K_XFINISH_F32, K_XFINISH_F64, K_XFINISH_F16, K_XFINISH_BF16,
    /* A staged problem's rows padded in and taken back out (msda_launch.c, staging). */
    K_RESTRIDE,
    K_COUNT
} msda_kernel_id;

typedef struct msda_kernel {
    CUfunction fn;   /* NULL where the device code was built without it */
    const char *name;
    int block;       /* threads per block: the occupancy API's choice, whole warps */
    int min_grid;    /* blocks that fill the device at that block size */
} msda_kernel;

typedef struct msda_module {
    CUcontext ctx;
    unsigned long long ctx_id; /* cuCtxGetId where the driver has it, else 0 */
    CUmodule modules[MSDA_PART_COUNT]; /* by part */
    int fatbin;                /* index of the embedded fatbin that loaded */
    msda_device_config config;
    msda_kernel kernels[K_COUNT];
    /* The points twin of each forward kernel (msda_forward_points_*; name NULL for the others):
     * the forward's fast path. */
    msda_kernel points[K_COUNT];
} msda_module;

/* The module of the calling thread's current context, loaded on first use. The pointer stays
 * valid for the life of the process. */
msda_status msda_module_get(const msda_driver *drv, const msda_module **mod, msda_error *err);

/* The embedded fatbins, in the loader's order (kernels/gen-fatbin-asm.sh writes the table from
 * what `msda-doctor build` planned: recipes/toolkits.json owns what each toolkit's output needs).
 * One entry per image: one fatbin per part, all of the same architecture, kind and toolkit. */
typedef struct msda_fatbin_blob {
    const unsigned char *data;
    uint64_t size;
} msda_fatbin_blob;

typedef struct msda_fatbin_ref {
    uint32_t needs_cuda;  /* the driver CUDA version it loads from: 11000 for 11.0 */
    uint32_t toolkit;     /* the CUDA that wrote it: 11080 for 11.8 */
    uint32_t ptx_isa;     /* its PTX ISA, major * 10 + minor; 0 for SASS */
    uint32_t parts;       /* the number of blobs: MSDA_PART_COUNT, or the build disagrees */
    const msda_fatbin_blob *blobs; /* by part */
} msda_fatbin_ref;

extern const msda_fatbin_ref msda_fatbin_table[];
extern const uint32_t msda_fatbin_table_count;

/* The environment variable that forces one kind of image, for testing each on one machine:
 * "sass:13.0", "sass:11.8" (SASS by the toolkit that wrote it), "ptx:9.0", "ptx:6.5" (PTX by ISA). */
#define MSDA_IMAGE_ENV "MSDA_IMAGE"

/* "CUDA 11.8 SASS" or "PTX ISA 6.5" for embedded fatbin INDEX, into BUF. */
void msda_fatbin_label(uint32_t index, char *buf, size_t size);

/* Whether embedded fatbin INDEX holds code a device of compute capability CC (major * 10 +
 * minor) can load: SASS of the same major at a minor up to its own, or PTX at or below CC.
 * 1 yes, 0 no, -1 when its headers cannot be read. */
int msda_fatbin_runs_on(uint32_t index, int cc);

#endif /* MSDA_MODULE_H */
