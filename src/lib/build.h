/* Carrying out a plan: nvcc per (architecture, toolkit) in parallel with a content-addressed
 * cache, the host library per CPU platform with the fatbins embedded, then one wheel each. */
#ifndef MD_BUILD_H
#define MD_BUILD_H

#include <time.h>
#include "plan.h"

#define MD_MAX_PLATFORMS 2

typedef struct {
    const md_plan *plan;
    const char *kernels_dir;      /* sources: kernels/ */
    const char *package_dir;      /* the Python package sources: wheels/ */
    const char *out_dir;          /* where wheels land: wheels/dist */
    const char *work_dir;         /* intermediate files: build/msda */
    const char *cache_dir;        /* compiled objects by content: build/msda-cache */
    const char *platforms[MD_MAX_PLATFORMS]; /* "x86_64", "aarch64" */
    size_t n_platforms;
    unsigned jobs;                /* parallel compilations, at least 1 */
    bool dry_run;                 /* plan the commands, run nothing */
    const char *version;          /* the wheel's version */
    time_t source_date_epoch;     /* the wheel members' time; 0: the writer's fixed default */
} md_build_config;

typedef struct {
    char **argv;                  /* NULL-terminated, owned */
    char what[96];                /* "sm_86 (CUDA 13.0)", "x86_64 msda_cpu.c", ... */
    char output[PATH_MAX];        /* the file it makes (in the cache) */
    bool cached;                  /* already there: not run */
    bool cacheable;               /* a compilation kept in the cache (not a pack or link step) */
} md_build_step;

typedef struct {
    char platform[16];
    char library[PATH_MAX];       /* the linked libmsda.so */
    unsigned glibc_major, glibc_minor; /* highest GLIBC_ version it needs */
    char platform_tag[128];       /* computed from the library: manylinux_2_17_x86_64... */
    char wheel[PATH_MAX];         /* the wheel written */
} md_build_output;

typedef struct {
    md_build_step *steps;
    size_t n_steps;
    md_build_output outputs[MD_MAX_PLATFORMS];
    size_t n_outputs;
    size_t n_compiled, n_cached;  /* cacheable steps run, and found in the cache */
    char failed_log[PATH_MAX];    /* the log of the step that failed, when one did */
} md_build_result;

/* Runs (or, with dry_run, only lists) every step, then checks each library's glibc floor and
 * linked libraries against manylinux_2_17 (MD_ERR_BUILD, naming the symbols, rather than a tag
 * that would lie) and writes one wheel per platform with the Python package of package_dir. MD_ERR_BUILD when a step fails (the message
 * has the step and the end of its log; failed_log names the log), MD_ERR_UNSUPPORTED when a
 * platform's compiler is missing. Free RESULT with md_build_result_free in every case. */
md_status md_build_run(const md_build_config *cfg, md_build_result *result, md_error *err);

void md_build_result_free(md_build_result *result);

/* The C compiler for PLATFORM ("x86_64" on an x86_64 machine: cc; "aarch64": the cross
 * compiler aarch64-linux-gnu-gcc unless native) into OUT; -1 when it is not installed. */
int md_platform_compiler(const char *platform, char *out, size_t size);

/* The CPU platform of this machine ("x86_64", "aarch64"). */
const char *md_host_platform(void);

#endif
