/* The GPUs of this machine, through the CUDA driver API (libcuda.so.1, opened with dlopen;
 * never the toolkit's stub). MSDA_LIBCUDA names another library (the tests' fake driver). */
#ifndef MD_GPU_PROBE_H
#define MD_GPU_PROBE_H

#include <stddef.h>
#include "status.h"

typedef struct {
    char name[128];
    unsigned sm;                 /* 61 for compute capability 6.1 */
    unsigned multiprocessors;
    unsigned registers_per_block;
    unsigned max_threads_per_block;
    unsigned long long memory_bytes;
} md_gpu;

typedef struct {
    int driver_version;          /* cuDriverGetVersion: 13000 for CUDA 13.0; 0 if unknown */
    md_gpu *gpus;
    size_t n_gpus;
    char library[256];           /* the driver library that answered */
} md_gpu_probe;

/* The CUDA driver library, opened and initialised. */
typedef struct {
    void *lib;                   /* never closed: drivers are not made to be unloaded, and what
                                  * cuInit allocated would dangle */
    char path[256];              /* MSDA_LIBCUDA, else libcuda.so.1 */
    int driver_version;          /* cuDriverGetVersion, asked before cuInit; 0 if it failed */
    int init_result;             /* cuInit's CUresult: 0, 100 (no device), 34 (the stub), ... */
} md_libcuda;

/* Opens the driver library and calls cuInit, whatever it answers (see init_result).
 * MD_ERR_UNSUPPORTED when the library cannot be opened or lacks cuInit/cuDriverGetVersion. */
md_status md_libcuda_open(md_libcuda *out, md_error *err);

/* The CUresult's name ("CUDA_ERROR_NO_DEVICE"), never NULL. */
const char *md_libcuda_error_name(const md_libcuda *cuda, int code);

/* Fills OUT. A machine without a driver is MD_ERR_UNSUPPORTED with the reason (no library,
 * cuInit failing with its error name); zero GPUs with a working driver is MD_OK. */
md_status md_gpu_probe_run(md_gpu_probe *out, md_error *err);

void md_gpu_probe_free(md_gpu_probe *probe);

#endif
