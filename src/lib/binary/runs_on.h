/* Whether a binary's GPU code can run on a given architecture, and whether its kernels fit
 * that architecture's registers per block.
 * Scope: public: src/cli may include it. */
#ifndef MD_RUNS_ON_H
#define MD_RUNS_ON_H

#include "recipes/arch.h"
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

typedef struct {
    md_runs_how how;
    unsigned code_sm;           /* the code chosen: sm_XX SASS or compute_XX PTX */
    char code_variant;
    md_kernel_fit *kernels;     /* for SASS: every kernel of the chosen architecture */
    size_t n_kernels;
    /* Kernels whose launch bounds, or (without bounds) a launch of the largest block, exceed
     * the registers per block: "too many resources requested for launch". */
    size_t n_not_fitting;
} md_verdict;

/* Decides how BIN runs on ARCH. Picks the newest SASS of the same major version whose minor is
 * not above the device's (arch-specific "a" code only on exactly its CC); failing that, the
 * newest PTX not above the device's CC. Fills the kernel checks from every entry of the chosen
 * SASS architecture. Free with md_verdict_free. */
md_status md_runs_on(const md_binary *bin, const md_arch *arch, md_verdict *out, md_error *err);

void md_verdict_free(md_verdict *v);

/* Registers a block of THREADS threads needs at REGISTERS per thread: each warp takes
 * REGISTERS*32 rounded up to the allocation unit of 256. */
unsigned long md_block_registers(unsigned registers, unsigned threads);

/* Largest block (a multiple of 32, at most MAX_THREADS) whose registers fit LIMIT. */
unsigned md_threads_that_fit(unsigned registers, unsigned limit, unsigned max_threads);

const char *md_runs_how_name(md_runs_how how);

#endif
