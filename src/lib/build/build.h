/* Carrying out a plan: nvcc per (architecture, toolkit) in parallel with a content-addressed
 * cache, the host library per CPU platform with the fatbins embedded, then one wheel each.
 * How each step compiles and links comes from kernels/libmsda.json (libmsda_recipe.h).
 * Scope: public: src/cli may include it. */
#ifndef MD_BUILD_H
#define MD_BUILD_H

#include <time.h>
#include "build_steps.h"
#include "fetch/fetch.h"
#include "recipes/libmsda_recipe.h"
#include "plan.h"

#define MD_MAX_PLATFORMS 2

typedef struct {
    const md_plan *plan;
    const md_libmsda_recipe *recipe;
    const char *source_dir;       /* the project folder: left out of the cache keys */
    const char *kernels_dir;      /* sources: kernels/ */
    const char *package_dir;      /* the Python package sources: wheels/ */
    const char *out_dir;          /* where wheels land: wheels/dist */
    const char *work_dir;         /* intermediate files, the linked libraries: build/msda */
    const char *cache_dir;        /* compiled objects by content: build/msda-cache */
    const char *platforms[MD_MAX_PLATFORMS]; /* "x86_64", "aarch64" */
    size_t n_platforms;
    unsigned jobs;                /* parallel compilations, at least 1 */
    unsigned step_timeout_s;      /* a compile or link step running longer is killed; 0: none */
    bool dry_run;                 /* plan the commands, run nothing */
    const char *version;          /* the wheel's and the library's version */
    time_t source_date_epoch;     /* the wheel members' time; 0: the writer's fixed default */
    /* Told once, with the lock's path and the id of the process holding it (0: unknown), when
     * another build of the same folder holds it and this one waits for it to finish; optional. */
    void (*on_wait)(void *ctx, const char *lock_path, long holder);
    bool no_wait;                 /* fail at once (MD_ERR_BUILD) rather than wait for the lock */
    void *wait_ctx;
    /* Told as steps start and end, and about once a second (build_steps.h); optional. */
    md_step_fn on_step;
    void *step_ctx;
    /* When it becomes non-zero (a signal the caller caught), the build stops its compilers and
     * returns MD_ERR_STOPPED, leaving nothing partial; NULL: never. */
    const volatile sig_atomic_t *stop;
} md_build_config;

typedef struct {
    char platform[16];
    char library[PATH_MAX];       /* the linked libmsda.so, as packed into the wheel */
    unsigned glibc_major, glibc_minor; /* highest GLIBC_ version it needs */
    char platform_tag[128];       /* computed from the library: manylinux_2_17_x86_64... */
    char wheel[PATH_MAX];         /* the wheel written */
} md_build_output;

typedef struct {
    md_build_step *steps;
    size_t n_steps;
    md_build_output outputs[MD_MAX_PLATFORMS];
    size_t n_outputs;
    md_step_counts counts;
    bool up_to_date;              /* nothing to compile, and every wheel the one the last build
                                     wrote, with the same inputs: nothing was linked or packed */
} md_build_result;

/* Runs (or, with dry_run, only lists) every step, then checks each library's glibc floor and
 * linked libraries against manylinux (MD_ERR_BUILD, naming the symbols, rather than a tag that
 * would lie) and writes one wheel per platform with the Python package of package_dir.
 * MD_ERR_BUILD when a step fails (the message has the step and the end of its log;
 * counts.failed_log names the log), MD_ERR_UNSUPPORTED when a platform's compiler is missing.
 * Free RESULT with md_build_result_free in every case. */
md_status md_build_run(const md_build_config *cfg, md_build_result *result, md_error *err);

void md_build_result_free(md_build_result *result);

/* The C compiler for PLATFORM ("x86_64" on an x86_64 machine: cc; "aarch64": the cross
 * compiler aarch64-linux-gnu-gcc unless native) into OUT; -1 when it is not installed. */
int md_platform_compiler(const char *platform, char *out, size_t size);

/* The CPU platform of this machine ("x86_64", "aarch64"). */
const char *md_host_platform(void);

/* ---- preparing a build: what the command line asks for, turned into a config and a plan ---- */

#define MD_MAX_TOOLKIT_DIRS 8

/* What a build takes when the caller says nothing: the CLI's help states these, diagnose's fixes
 * name the folder the wheels land in. */
#define MD_BUILD_DEFAULT_ARCH "all"
#define MD_BUILD_DEFAULT_OUT "wheels/dist"
#define MD_BUILD_DEFAULT_CACHE "build/msda-cache"
#define MD_BUILD_DEFAULT_STEP_TIMEOUT_S 3600 /* a compiler that hangs must not hang the build */

typedef struct {
    const char *arch;             /* --arch: "all", "native" or a list */
    const char *toolkit_dirs[MD_MAX_TOOLKIT_DIRS]; /* --toolkit */
    size_t n_toolkit_dirs;
    const char *platforms;        /* --platform "x86_64,aarch64"; NULL: this machine's, and the
                                     other where its cross compiler is installed */
    const char *source_dir;       /* the project folder with kernels/ and wheels/; NULL: the sources
                                     embedded in this msda-doctor, unpacked under cache_dir */
    const char *out_dir;
    const char *cache_dir;
    const char *const *defines;   /* --define, NULL-terminated or NULL */
    unsigned jobs;
    unsigned step_timeout_s;      /* MSDA_BUILD_STEP_TIMEOUT; 0: none */
    bool dry_run;
    time_t source_date_epoch;
    /* Fetch first: each toolkit release the plan names for architectures that no toolkit here
     * targets is fetched into the fetch cache with fetch's defaults (fetch.h), then used as if
     * given in TOOLKIT_DIRS, and the plan made again. ON_FETCH, when set, is told of each
     * release before its download starts; FETCH_PROGRESS, when set, of the bytes as they come. */
    bool fetch;
    void (*on_fetch)(void *ctx, const char *release, size_t n_archs);
    void (*on_wait)(void *ctx, const char *lock_path, long holder); /* md_build_config's */
    bool no_wait;                 /* md_build_config's */
    md_step_fn on_step;           /* md_build_config's */
    const volatile sig_atomic_t *stop; /* md_build_config's */
    md_http_progress_fn fetch_progress;
    void *ctx;                    /* given to each of the callbacks */
} md_build_request;

typedef struct {
    md_build_config cfg;          /* points into this struct: do not copy it */
    md_plan plan;
    md_libmsda_recipe recipe;
    md_toolkit *toolkits;
    size_t n_toolkits;
    md_host_compiler *compilers;
    size_t n_compilers;
    char source_dir[PATH_MAX];    /* the project folder used: --source, or the embedded sources' */
    bool embedded_source;         /* source_dir holds the embedded sources */
    char kernels_dir[PATH_MAX], package_dir[PATH_MAX], work_dir[PATH_MAX];
    char platform_names[MD_MAX_PLATFORMS][16];
} md_build_job;

/* A request with the defaults above, as many jobs as this machine has cores, nothing else set. */
md_build_request md_build_request_defaults(void);

/* Reads the recipe, finds the toolkits and host compilers, probes the GPUs for "native", picks
 * the platforms and folders, and makes the plan. MD_ERR_ARGUMENT for what the caller got wrong
 * (an unknown platform or architecture, a malformed define); the others as md_plan_make.
 * Free JOB with md_build_job_free in every case. */
md_status md_build_prepare(const md_build_request *req, md_build_job *job, md_error *err);

void md_build_job_free(md_build_job *job);

#endif
