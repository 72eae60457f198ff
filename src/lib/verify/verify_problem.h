/* verify's test problem: its inputs, the CPU path's f64 result that every run is held to, the
 * buffers of one run in one data type, and the judging of a run's errors. The GPU checks and the
 * wheel-level flow are verify.c's.
 * Scope: private to src/lib/verify. */
#ifndef MD_VERIFY_PROBLEM_H
#define MD_VERIFY_PROBLEM_H

#include <stdbool.h>
#include <stddef.h>
#include "msda.h"
#include "base/status.h"
#include "verify_report.h"

/* The wheel's libmsda.so, bound by name: not a library this program links. */
/* The variable with which libmsda forces one kind of image (kernels/msda_module.h's
 * MSDA_IMAGE_ENV; verify sets it to check each), and the most kinds and their name length. */
#define MD_VERIFY_IMAGE_ENV "MSDA_IMAGE"
#define MD_VERIFY_MAX_IMAGES 16
#define MD_VERIFY_KEY 32

typedef struct {
    const char *(*version)(void);
    int (*archs_string)(char *, size_t);
    int (*embedded)(msda_arch *, int);
    msda_status (*forward_cpu)(const msda_forward_args *, int, msda_error *);
    msda_status (*backward_cpu)(const msda_backward_args *, int, msda_error *);
    msda_status (*forward_cuda)(const msda_forward_args *, void *, msda_error *);
    msda_status (*backward_cuda)(const msda_backward_args *, void *, msda_error *);
    msda_status (*prepare)(msda_error *);
    msda_status (*loaded_fatbin)(int *, msda_error *); /* optional */
    int (*fatbin_describe)(int, char *, size_t);       /* optional: "CUDA 11.8 SASS, driver ..." */
    int (*fatbin_key)(int, char *, size_t);            /* optional: "sass:11.8", MSDA_IMAGE's form */
    int (*fatbin_count)(void);                         /* optional */
    int (*abi_version)(void);                           /* optional */
} md_msda_api;

/* The op's tensors, inputs first; what a run writes starts at MD_VP_OUT (but MD_VP_GRAD_OUT). */
enum {
    MD_VP_VALUE, MD_VP_LOC, MD_VP_ATTN, MD_VP_OUT, MD_VP_GRAD_OUT,
    MD_VP_GRAD_VALUE, MD_VP_GRAD_LOC, MD_VP_GRAD_ATTN, MD_VP_BUFFERS
};

/* One run's tensors in data type D (an index of verify.h's dtypes), in host memory. */
typedef struct {
    void *buf[MD_VP_BUFFERS];
    size_t bytes[MD_VP_BUFFERS];
    int dtype;
} md_vp_buffers;

typedef struct md_vp_problem md_vp_problem;

/* Makes the problem and its f64 reference on the CPU path of API. MD_ERR_BUILD when that path
 * fails, MD_ERR_NOMEM. Free *OUT with md_vp_free. */
md_status md_vp_new(const md_msda_api *api, md_vp_problem **out, md_error *err);

void md_vp_free(md_vp_problem *p);

/* Runs the CPU path in every data type against the f64 reference and fills DEV; keeps each
 * result, which is what a GPU run must match. */
void md_vp_check_cpu(const md_msda_api *api, md_vp_problem *p, md_verify_device *dev);

/* Names R's data type D and sets the tolerance that a GPU run is held to. */
void md_vp_start_gpu_dtype(md_verify_dtype *r, int d);

/* Whether the CPU path ran in data type D (so a GPU run has something to match). */
bool md_vp_cpu_ran(const md_vp_problem *p, int d);

/* Allocates H with the inputs in data type D and the outputs poisoned (NaN in every type), so an
 * element that a run leaves unwritten fails. false when out of memory (H is then freeable). */
bool md_vp_buffers_alloc(md_vp_buffers *h, const md_vp_problem *p, int d);

void md_vp_buffers_free(md_vp_buffers *h);

/* The op's arguments in data type D over the eight tensors at BUF (host or device pointers). */
void md_vp_args(msda_forward_args *f, msda_backward_args *b, int d, void *const buf[MD_VP_BUFFERS]);

/* Judges H, a GPU run's results, against the CPU path's in the same data type: sets R's errors
 * and whether it passed. */
void md_vp_judge_gpu(md_verify_dtype *r, const md_vp_buffers *h, const md_vp_problem *p);

#endif
