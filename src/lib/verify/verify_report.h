/* What verify found: per device and per data type, the errors against the f64 CPU path, and
 * what ran there. Filled by verify.c and verify_problem.c, rendered by the CLI.
 * Scope: public: src/cli may include it. */
#ifndef MD_VERIFY_REPORT_H
#define MD_VERIFY_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#define MD_VERIFY_DTYPES 4

typedef struct {
    const char *dtype;      /* "f32", "f64", "f16", "bf16" */
    bool ran;
    bool passed;
    double forward_error;   /* ||out - ref|| / ||ref|| against the f64 CPU path */
    double backward_error;  /* the largest of the three gradients' */
    bool deterministic_ran; /* GPUs, libraries of ABI 4 and later: the deterministic backward */
    double deterministic_error; /* its largest gradient error, held to the same tolerance */
    double tolerance;
    char error[320];        /* the library's message when it failed to run */
} md_verify_dtype;

typedef struct {
    char device[160];       /* "CPU" or "GPU 0: NVIDIA H200 (sm_90)" */
    bool is_gpu;
    unsigned sm;
    char code[128];         /* what ran: "sm_90 SASS: CUDA 13.0 SASS, driver CUDA >= 13.0", "CPU" */
    md_verify_dtype dtypes[MD_VERIFY_DTYPES];
    bool passed;
    char error[320];        /* set when the device could not be used at all */
} md_verify_device;

typedef struct {
    char wheel[4096];
    char library_version[32];
    char embedded[512];     /* the library's own list: "sm_50 ... compute_121" */
    bool record_ok;
    char record_error[320];
    md_verify_device *devices; /* the CPU first, then each GPU */
    size_t n_devices;
    char gpu_note[320];     /* why no GPU was checked, when none was */
    bool passed;
} md_verify_report;

#endif
