/* CUDA toolkits and host compilers found on this machine, and what each can do.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_TOOLKIT_H
#define MD_TOOLKIT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

#define MD_MAX_SMS 48

typedef struct {
    char nvcc[PATH_MAX];        /* absolute path of nvcc (a wrapper script counts) */
    char bin_dir[PATH_MAX];     /* put first on PATH when running it: its own ptxas, not another's */
    char include_dir[PATH_MAX]; /* where its cuda.h is */
    char version[16];           /* "13.0" */
    unsigned major, minor;
    char version_text[160];     /* the "Cuda compilation tools, release ..." line, for cache keys */
    unsigned sms[MD_MAX_SMS];   /* real architectures, ascending, from nvcc --list-gpu-code */
    size_t n_sms;
    unsigned max_gcc;           /* newest host gcc major it accepts (recipes/toolkits.json); 0 unknown */
    bool split_compile;         /* its nvcc takes --split-compile N (its --help says so): given
                                   PTX, ptxas then compiles the kernels on N threads; asked by
                                   md_toolkit_probe_split_compile, which only build needs */
} md_toolkit;

typedef struct {
    char path[PATH_MAX];        /* absolute path of g++ or g++-N */
    unsigned major;
    bool is_default;            /* the g++ on PATH, which nvcc uses without -ccbin */
} md_host_compiler;

/* Finds nvcc in each of EXTRA_DIRS (DIR/bin/nvcc or DIR/nvcc), then in $CUDA_HOME, in
 * /usr/local/cuda*, in Debian's /usr/lib/nvidia-cuda-toolkit, on PATH and in the toolkits
 * `fetch` put in its cache (fetch_cache.h) for a platform that runs on this machine, the
 * preferred one of a version first (MSDA_TOOLKIT_PATHS, a colon-separated list of
 * folders, replaces that default search); asks each for its version and
 * architectures. One toolkit per version, the first found winning, sorted newest first.
 * An EXTRA_DIRS entry without a working nvcc is an MD_ERR_ARGUMENT error. *OUT is malloc'd. */
md_status md_toolkits_find(const char *const *extra_dirs, size_t n_extra, md_toolkit **out, size_t *count,
                           md_error *err);

/* Asks TK's nvcc --help whether it takes --split-compile (TK->split_compile). */
void md_toolkit_probe_split_compile(md_toolkit *tk);

/* True when TK lists SM. */
bool md_toolkit_supports(const md_toolkit *tk, unsigned sm);

/* The newest gcc major that nvcc VERSION ("11.8") accepts, from recipes/toolkits.json; 0 unknown. */
unsigned md_toolkit_max_gcc(unsigned major, unsigned minor);

/* Which toolkit versions of recipes/toolkits.json target SM, as "10.2 to 12.9" into OUT. */
void md_toolkits_supporting(unsigned sm, char *out, size_t size);

/* g++ and g++-N (N from 5 to 20) on PATH, each with its major version, newest first. */
md_status md_host_compilers_find(md_host_compiler **out, size_t *count, md_error *err);

#endif
