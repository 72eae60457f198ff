/* Whether a binary's GPU code can run on a given architecture, and whether its kernels fit
 * that architecture's registers per block.
 * Scope: public: src/cli may include it. */
#ifndef MD_RUNS_ON_H
#define MD_RUNS_ON_H

#include "recipes/arch.h"
/* The driver names and floors a verdict is worded with (md_driver_parse, md_driver_min_for_cuda,
 * md_cuda_version_text), for src/cli, which may include only public headers. */
#include "recipes/driver_table.h"
#include "recipes/toolkit_table.h"
#include "devcode.h"

typedef enum {
    MD_RUNS_SASS = 0,   /* machine code the device runs as is */
    MD_RUNS_PTX_JIT,    /* only through the driver compiling PTX at load time */
    MD_RUNS_NOT         /* "no kernel image is available for execution on the device" */
} md_runs_how;

typedef struct {
    const char *name;           /* borrowed from the binary */
    unsigned registers;
    unsigned threads;           /* launch bounds, or the largest block a launch may ask for */
    bool bounds_declared;       /* threads come from __launch_bounds__ */
    unsigned long registers_needed; /* for one block of THREADS, in allocation units */
    unsigned registers_per_block;   /* the architecture's limit */
    unsigned max_threads_that_fit;  /* largest multiple of 32 that fits, at most 1024 */
    bool fits;
} md_kernel_fit;

/* One piece of code and what it asks of a driver (the entry's headers; 0 where they do not say). */
typedef struct {
    md_runs_how how;            /* MD_RUNS_NOT: none */
    unsigned sm;
    char variant;
    unsigned toolkit;           /* SASS: the CUDA release that wrote it, 11080 */
    unsigned ptx_isa;           /* PTX: its ISA, 78 */
    int needs_cuda;             /* the oldest driver CUDA version that loads it, 11000 */
} md_code_pick;

typedef struct {
    md_runs_how how;
    unsigned code_sm;           /* the code chosen: sm_XX SASS or compute_XX PTX */
    char code_variant;
    unsigned code_toolkit;      /* what the chosen code's headers say (md_code_pick) */
    unsigned code_ptx_isa;
    int code_needs_cuda;
    int driver_cuda;            /* the driver judged against, as given; 0: any driver */
    /* The code that would have been chosen for any driver, when the driver's CUDA version is too
     * old for it (how is MD_RUNS_NOT otherwise): it is why the verdict is PTX JIT, older SASS, or
     * nothing. */
    md_code_pick passed_over;
    /* How NOT being able to run reads, when how is MD_RUNS_NOT: "no SASS sm_10x up to sm_103, no
     * PTX up to compute_103", and for arch-specific or family code that is there but does not
     * apply, what it is and where it runs ("; sm_100a SASS is there, but arch-specific code runs
     * only on sm_100"): the one wording inspect and diagnose give. */
    char cannot_run[320];
    /* The chosen SASS was written by a newer toolkit than the driver's CUDA version: it loads
     * through minor-version compatibility, which NVIDIA documents for discrete GPUs only. */
    bool minor_version_compat;
    md_kernel_fit *kernels;     /* for SASS: every kernel of the chosen architecture */
    size_t n_kernels;
    /* Kernels whose launch bounds, or (without bounds) a launch of the largest block, exceed
     * the registers per block: "too many resources requested for launch". */
    size_t n_not_fitting;
} md_verdict;

/* Decides how BIN runs on ARCH under a driver of CUDA version DRIVER_CUDA (12020; 0: any driver).
 * Picks the newest SASS of the same major version whose minor is not above the device's
 * (arch-specific "a" code only on exactly its CC); failing that, the newest PTX not above the
 * device's CC. With a driver, only code whose needs_cuda is known and not above it counts (code
 * whose need is unknown counts too). Of equal code, the one with the newest need the driver
 * meets is chosen; without a driver, the one with the oldest need. Fills the kernel checks from
 * every entry of the chosen SASS architecture and toolkit. Free with md_verdict_free. */
md_status md_runs_on(const md_binary *bin, const md_arch *arch, int driver_cuda, md_verdict *out, md_error *err);

void md_verdict_free(md_verdict *v);

/* Registers a block of THREADS threads needs at REGISTERS per thread: each warp takes
 * REGISTERS*32 rounded up to the allocation unit of 256. */
unsigned long md_block_registers(unsigned registers, unsigned threads);

/* Largest block (a multiple of 32, at most MAX_THREADS) whose registers fit LIMIT. */
unsigned md_threads_that_fit(unsigned registers, unsigned limit, unsigned max_threads);

/* "sm_80 SASS from CUDA 13.0", "compute_61 PTX of ISA 7.8", or "sm_80 SASS" where the headers
 * do not say: the one wording of a piece of code, for inspect and diagnose. */
void md_code_pick_text(const md_code_pick *p, char *out, size_t size);

const char *md_runs_how_name(md_runs_how how);

#endif
