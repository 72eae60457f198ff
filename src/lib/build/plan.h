/* The build plan: which architectures to compile, with which toolkit, host compiler and
 * per-architecture kernel choices (FP16/BF16, half atomics, threads per block).
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_PLAN_H
#define MD_PLAN_H

#include "recipes/libmsda_recipe.h"
#include "machine/toolkit.h"


#define MD_MAX_DEFINES 24

/* The knobs of kernels/msda.h that the plan reports by name (kernels/libmsda.json decides them). */
#define MD_KNOB_MAX_THREADS "MSDA_MAX_THREADS"
#define MD_KNOB_ENABLE_F16 "MSDA_ENABLE_F16"
#define MD_KNOB_ENABLE_BF16 "MSDA_ENABLE_BF16"
#define MD_KNOB_F16_ATOMIC "MSDA_F16_ATOMIC"
#define MD_KNOB_BF16_ATOMIC "MSDA_BF16_ATOMIC"

typedef struct {
    char name[MD_KNOB_NAME_MAX];
    long value;
} md_define;

typedef struct {
    unsigned sm;
    bool ptx;                   /* compute_XX code for the driver to JIT, not sm_XX SASS */
    bool known;                 /* in recipes/architectures.json; else built with the safe defaults */
    const md_toolkit *toolkit;  /* points into md_plan.toolkits */
    unsigned ptx_isa;           /* PTX: the ISA it declares (major * 10 + minor); 0 for SASS */
    bool lowered;               /* PTX for old drivers: the toolkit's PTX with .version lowered to
                                   ptx_isa, checked by its ptxas (libmsda.json old_driver_ptx) */
    int needs_cuda;             /* the driver CUDA version from which it loads (11000 for 11.0) */
    char needs_cuda_text[8];    /* the same as "11.0" */
    char needs_driver[24];      /* the first Linux driver of that version: "450.80.02" */
    char ccbin[PATH_MAX];       /* the host compiler for nvcc; "" for nvcc's default g++ */
    md_define defines[MD_MAX_DEFINES]; /* kernels/libmsda.json's knobs, then --define's extras */
    size_t n_defines;
} md_plan_target;

#define MD_PLAN_MAX_FETCH 4

/* Architectures that no toolkit here targets and one `fetch --cuda RELEASE` would add. */
typedef struct {
    char release[16];           /* "12.9.1": the newest in recipes/toolkits.json that targets them */
    unsigned sms[MD_MAX_SMS];
    size_t n_sms;
} md_plan_fetch;

typedef struct {
    md_toolkit *toolkits;       /* owned copies, newest first */
    size_t n_toolkits;
    md_plan_target *targets;    /* SASS ascending (the newest toolkit first within an
                                   architecture), then PTX, then the old drivers' PTX */
    size_t n_targets;
    char notes[8][320];         /* what was left out or defaulted and why */
    size_t n_notes;
    md_plan_fetch fetch[MD_PLAN_MAX_FETCH]; /* for "all": the table's architectures left out; for
                                   a list: those it names that no toolkit targets (also after
                                   MD_ERR_UNSUPPORTED, so that the caller can fetch and plan again) */
    size_t n_fetch;
} md_plan;

/* What an architecture spec asks for: every architecture, the GPUs here, or a list. */
typedef enum { MD_ARCH_SPEC_LIST = 0, MD_ARCH_SPEC_ALL, MD_ARCH_SPEC_NATIVE } md_arch_spec_kind;

/* The kind of SPEC: "all", "native", else a list (read by md_plan_make). The one place those
 * two words are recognised. */
md_arch_spec_kind md_arch_spec_kind_of(const char *spec);

typedef struct {
    const char *arch_spec;      /* "all", "native" or a list: see md_plan_make */
    md_arch_spec_kind kind;     /* md_arch_spec_kind_of(arch_spec), read once by the caller */
    const unsigned *native_sms; /* the GPUs here, for "native" */
    size_t n_native;
    int native_driver_cuda;     /* for "native": the driver's CUDA version (13000 for 13.0), 0
                                   when unknown; each GPU then gets only the SASS this driver
                                   loads, from the newest toolkit whose SASS it loads */
    const md_toolkit *toolkits;
    size_t n_toolkits;
    const md_host_compiler *compilers;
    size_t n_compilers;
    const md_libmsda_recipe *recipe; /* the per-architecture knobs and the PTX choice */
    const char *const *defines; /* "NAME=VALUE" or "NAME" (1): a knob's value for every target,
                                   or an extra macro; NULL-terminated or NULL */
} md_plan_request;

/* Makes the plan for ARCH_SPEC: "all" (every SASS architecture the toolkits target, those the
 * architecture table lacks with the recipe's safe defaults and a note, plus the PTX the recipe
 * asks for), "native" (NATIVE_SMS, the GPUs here), or a comma list of sm_XY, X.Y or GPU names,
 * each optionally followed by "+PTX".
 * MD_ERR_ARGUMENT for a malformed spec, unknown name or malformed define; MD_ERR_UNSUPPORTED
 * when an architecture has no toolkit (the message names the toolkits that would), when a
 * toolkit has no usable host compiler (the message says what to install), or for "native"
 * without GPUs. Either way OUT->fetch names the toolkit releases that would add what is missing;
 * free OUT with md_plan_free in every case. */
md_status md_plan_make(const md_plan_request *req, md_plan *out, md_error *err);

/* The value of macro NAME for T, or FALLBACK when T does not define it. */
long md_plan_define(const md_plan_target *t, const char *name, long fallback);

/* "native", "cas", "f32-buffer", "mixed" for an MSDA_*_ATOMIC value (kernels/msda_kparams.h's
 * MSDA_ATOMIC_*, their one owner); "?" for another. */
const char *md_atomic_name(long strategy);

void md_plan_free(md_plan *plan);

#endif
