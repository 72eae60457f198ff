/* What `diagnose` learns about this machine: one check per probe (its status and lines for the
 * checklist) and the facts behind it (for the JSON "machine" object and for tying log findings
 * to the machine). Filled by the diag_probe_*.c files; nothing here prints.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_DIAG_H
#define MD_DIAG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include "binary/devcode.h"
#include "base/process.h"
#include "machine/gpu_probe.h"
#include "binary/runs_on.h"
#include "base/status.h"
#include "machine/toolkit.h"
#include "recipes/toolkit_table.h" /* md_cuda_version_text */

typedef enum {
    MD_CHECK_OK = 0,     /* [✓] */
    MD_CHECK_WARN,       /* [!] something to know, nothing broken */
    MD_CHECK_FAIL,       /* [✗] a problem on this machine */
    MD_CHECK_ERROR,      /* [✗] the probe itself failed; the others still ran */
    MD_CHECK_SKIPPED     /* [-] not applicable here (not a Jetson, --no-probe) */
} md_check_status;

typedef enum { MD_LINE_PROBLEM, MD_LINE_HINT, MD_LINE_DETAIL } md_line_kind;

typedef struct {
    md_line_kind kind;
    char text[400];
} md_check_line;

#define MD_CHECK_LINES 48

typedef struct {
    const char *id;               /* stable: "gpu", "nvidia-smi", "jetson", "toolkits", ... */
    const char *name;             /* "GPUs (driver API)" */
    md_check_status status;
    char summary[300];            /* the row's text after the name */
    md_check_line lines[MD_CHECK_LINES];
    size_t n_lines;
    md_hint hint;                 /* what the user could give to run the check: the CLI words it */
} md_check;

/* Whether a check of STATUS is a problem: what makes diagnose exit 1 and what its summary
 * counts as one. A warning is not. */
bool md_check_is_problem(md_check_status status);

/* Appends a line (dropped silently past MD_CHECK_LINES: a checklist is not a log). */
void md_check_add(md_check *c, md_line_kind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Raises C's status to ST when ST is worse. */
void md_check_raise(md_check *c, md_check_status st);
const char *md_check_status_name(md_check_status st);

/* ---- facts ------------------------------------------------------------------------------- */

#define MD_DIAG_MAX_GPUS 16
#define MD_DIAG_MAX_BINARIES 32
#define MD_DIAG_MAX_FRAMEWORKS 8
#define MD_DIAG_MAX_DIRS 16

typedef struct {
    char name[128];
    unsigned sm;
    unsigned long long memory_mib;
    bool has_sm;
} md_smi_gpu;

typedef struct {
    bool found;                      /* the program exists */
    bool answered;                   /* a query succeeded */
    bool compute_cap_fallback;       /* the driver rejected compute_cap; asked without it */
    char path[PATH_MAX];
    char driver_release[32];         /* "580.159.04" */
    md_smi_gpu gpus[MD_DIAG_MAX_GPUS];
    size_t n_gpus;
    char error[256];
} md_smi_facts;

typedef struct {
    bool present;                    /* ROOT/etc/nv_tegra_release exists */
    char l4t[16];                    /* "32.7.4" */
    char jetpack[16];                /* "4.6.4" */
    char cuda[16];                   /* "10.2" */
    char model[128];                 /* device-tree model string */
    char module[64];                 /* "Jetson TX2" */
    unsigned sm;                     /* 62; 0 when the module is unknown */
    unsigned registers_per_block;
} md_jetson_facts;

typedef struct {
    bool ran;                        /* the interpreter ran our probe and answered */
    char python[PATH_MAX];           /* as given or found */
    char executable[PATH_MAX];       /* sys.executable */
    char version[32];
    bool has_torch;
    char torch_version[64];
    char torch_cuda[16];             /* torch.version.cuda, "" for a CPU build */
    int cxx11_abi;                   /* -1 unknown, 0, 1: libc10.so exports std::__cxx11 symbols */
    int has_magma;                   /* -1 unknown, 0, 1: ATen/cuda/CUDAConfig.h's AT_MAGMA_ENABLED() */
    char torch_lib_dir[PATH_MAX];
    bool msda_importable;            /* MultiScaleDeformableAttention or msda can be found */
    char **binary_paths;             /* copies of the op found on sys.path; malloc'd */
    size_t n_binary_paths;
    /* The frameworks that carry an MSDA op (and msda, and the kernels package) found on
     * sys.path, with the version their files state ("" where none was read). */
    struct {
        char name[24];
        char version[48];
    } frameworks[MD_DIAG_MAX_FRAMEWORKS];
    size_t n_frameworks;
    char error[256];
} md_python_facts;

typedef enum {
    MD_BIN_EXTENSION = 0,            /* MultiScaleDeformableAttention*.so, the original op */
    MD_BIN_MSDA_WHEEL,               /* this project's msda package (libmsda.so or a .whl) */
    MD_BIN_OTHER_OP                  /* mmcv, detrex, GroundingDINO copies of the op */
} md_binary_kind;

typedef struct {
    md_runs_how how;
    unsigned code_sm;
    char code_variant;
    size_t n_not_fitting;
    unsigned max_threads_that_fit;   /* smallest over the kernels that do not fit */
    char worst_kernel[128];          /* the kernel needing the most registers per block */
    unsigned worst_registers;
    unsigned worst_threads;
    unsigned long worst_needed;
    unsigned code_toolkit;           /* the CUDA release that wrote the chosen SASS; 0: not known */
    int code_needs_cuda;             /* the driver CUDA version the chosen code needs; 0: not known */
    md_code_pick passed_over;        /* better code this machine's driver cannot load (how MD_RUNS_NOT: none) */
    char cannot_run[320];            /* md_verdict's, when how is MD_RUNS_NOT */
} md_binary_on_gpu;

typedef struct {
    char path[PATH_MAX];
    md_binary_kind kind;
    bool readable;
    char error[256];
    char sass[256];                  /* "sm_52 sm_61" */
    char ptx[128];                   /* "compute_61" */
    unsigned sass_sms[32];
    size_t n_sass;
    unsigned ptx_sms[16];
    size_t n_ptx;
    md_binary_on_gpu on_gpu[MD_DIAG_MAX_GPUS]; /* one per md_machine gpu, same order */
    /* Host symbols of an extension (not of libmsda, which links no torch); -1: not known */
    int torch_imports;               /* at::, c10:: and torch:: symbols it imports */
    int torch_missing;               /* of those, not exported by the probed torch's libraries */
    char missing_symbol[256];        /* the first of them, mangled */
    int needs_torch_python;          /* imports THP* or torch::python symbols */
    int links_torch_python;          /* DT_NEEDED libtorch_python.so */
    int half_kernels;                /* kernels for float16/bfloat16 among those read; -1: none read */
} md_binary_facts;

typedef struct {
    char dir[PATH_MAX];
    char soname[64];                 /* "libcudnn.so.8" */
    unsigned major;
    bool unversioned_link;           /* DIR/libcudnn.so exists */
} md_cudnn_dir;

/* The GPUs the rest of the report reasons about: the driver's, else Jetson's. */
typedef struct {
    char name[128];
    unsigned sm;
    unsigned registers_per_block;
    unsigned multiprocessors;
    unsigned max_threads_per_block;
    unsigned long long memory_bytes;
    const char *source;              /* "driver", "jetson" */
} md_machine_gpu;

typedef struct {
    /* options */
    const char *root;                /* prefix for /etc, /proc and library folders; "" for / */
    const char *python;              /* NULL: python3 on PATH */
    const char *const *search_dirs;
    size_t n_search_dirs;

    /* driver API */
    bool driver_loaded;              /* the library loaded and cuInit answered */
    md_gpu_probe driver;
    char driver_error[256];
    char driver_release[32];         /* "580.159.04", from nvidia-smi or /proc/driver/nvidia/version */

    md_smi_facts smi;
    md_jetson_facts jetson;

    md_toolkit *toolkits;
    size_t n_toolkits;
    const md_toolkit *build_toolkit; /* the nvcc a torch extension build would use, or NULL */
    md_host_compiler *compilers;
    size_t n_compilers;
    const md_host_compiler *default_compiler;

    md_python_facts py;
    md_child py_child;               /* the Python probe, running while the other probes do */
    enum { MD_PY_NOT_FOUND, MD_PY_FAILED, MD_PY_RUNNING, MD_PY_DONE } py_state;

    md_binary_facts *binaries;
    size_t n_binaries;

    md_cudnn_dir cudnn[MD_DIAG_MAX_DIRS];
    size_t n_cudnn;
    bool nccl_found;

    md_machine_gpu gpus[MD_DIAG_MAX_GPUS];
    size_t n_gpus;
} md_machine;

/* The probes. Each fills its part of M and its check C; none fails as a whole: a probe that
 * cannot run records MD_CHECK_ERROR with the reason and leaves its facts empty. */
void md_probe_gpu(md_machine *m, md_check *c);
void md_probe_smi(md_machine *m, md_check *c);
/* Adds the GPUs of nvidia-smi's `--format=csv,noheader,nounits` answer OUT (name, [compute_cap,]
 * driver_version, memory.total per line; cut in place) to S; lines of another shape are skipped. */
void md_smi_parse(md_smi_facts *s, char *out, bool with_cc);
/* Rewrites the GPU check's summary once nvidia-smi has told the driver's release number. */
void md_probe_gpu_summary(const md_machine *m, md_check *c);
void md_probe_jetson(md_machine *m, md_check *c);
/* The host symbols of one installed extension, F->path, against the probed torch's libraries:
 * fills F's torch_* fields and adds its lines to the binaries check C. */
void md_probe_binary_symbols(const md_machine *m, md_binary_facts *f, md_check *c);
void md_probe_toolkits(md_machine *m, md_check *c);
/* Starts the Python probe; md_probe_python collects it (after the toolkits' probe). */
void md_probe_python_start(md_machine *m);
void md_probe_python(md_machine *m, md_check *c);
/* One line per framework the Python probe found (diag_probe_frameworks.c): which MSDA op it
 * runs here, and what switches it to msda. */
void md_python_framework_lines(const md_python_facts *p, md_check *c);
void md_probe_binaries(md_machine *m, md_check *c);   /* after gpu, jetson and python */
void md_probe_cudnn(md_machine *m, md_check *c);

/* Fills M->gpus from the driver, else the Jetson files (after those probes). */
void md_machine_settle_gpus(md_machine *m);

void md_machine_free(md_machine *m);

/* ROOT + PATH into OUT. */
void md_rooted(const md_machine *m, const char *path, char *out, size_t size);

/* The oldest driver release TK needs (recipes/toolkits.json), "580.65.06"; "" when unknown. */
void md_toolkit_min_driver(const md_toolkit *tk, char *out, size_t size);

#endif
