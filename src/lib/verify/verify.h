/* Checking a built wheel on this machine: its RECORD, then its libmsda.so loaded here, running
 * forward and backward on the CPU and on every GPU, each compared with the CPU path in f64.
 * Scope: public: src/cli may include it. */
#ifndef MD_VERIFY_H
#define MD_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

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
    char code[64];          /* what ran: "sm_90 SASS", "compute_121 PTX (JIT)", "CPU" */
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

/* Verifies WHEEL. Returns MD_OK when the checks ran (REPORT says whether they passed), or an
 * error when the wheel cannot be read or its library cannot be loaded here (another CPU
 * platform, say). Free REPORT with md_verify_report_free. */
md_status md_verify_wheel(const char *wheel, md_verify_report *report, md_error *err);

void md_verify_report_free(md_verify_report *report);

#endif
