/* The build plan: which architectures to compile, with which toolkit, host compiler and
 * per-architecture kernel choices (FP16/BF16, half atomics, threads per block). */
#ifndef MD_PLAN_H
#define MD_PLAN_H

#include "toolkit.h"

/* How the backward accumulates f16/bf16 value gradients (kernels/msda.h MSDA_*_ATOMIC). */
typedef enum {
    MD_ATOMIC_NATIVE = 1,
    MD_ATOMIC_CAS = 2,
    MD_ATOMIC_F32_BUFFER = 3,
    MD_ATOMIC_MIXED = 4     /* native on sparse levels, the f32 buffer on dense ones */
} md_atomic_strategy;

typedef struct {
    unsigned sm;
    bool ptx;                   /* compute_XX code for the driver to JIT, not sm_XX SASS */
    const md_toolkit *toolkit;  /* points into md_plan.toolkits */
    char ccbin[PATH_MAX];       /* the host compiler for nvcc; "" for nvcc's default g++ */
    unsigned max_threads;       /* __launch_bounds__ */
    bool f16, bf16;
    md_atomic_strategy f16_atomic, bf16_atomic;
} md_plan_target;

typedef struct {
    md_toolkit *toolkits;       /* owned copies, newest first */
    size_t n_toolkits;
    md_plan_target *targets;    /* SASS ascending, then PTX */
    size_t n_targets;
    char notes[8][160];         /* what was left out and why ("sm_88: not in the table") */
    size_t n_notes;
} md_plan;

/* Makes the plan for ARCH_SPEC: "all" (every architecture the toolkits target that the table
 * knows, plus PTX of the newest), "native" (NATIVE_SMS, the GPUs here), or a comma list of
 * sm_XY, X.Y or GPU names, each optionally followed by "+PTX".
 * MD_ERR_ARGUMENT for a malformed spec or unknown name; MD_ERR_UNSUPPORTED when an architecture
 * has no toolkit (the message names the toolkits that would), when a toolkit has no usable host
 * compiler (the message says what to install), or for "native" without GPUs. */
md_status md_plan_make(const char *arch_spec, const unsigned *native_sms, size_t n_native,
                       const md_toolkit *toolkits, size_t n_toolkits, const md_host_compiler *compilers,
                       size_t n_compilers, md_plan *out, md_error *err);

void md_plan_free(md_plan *plan);

#endif
