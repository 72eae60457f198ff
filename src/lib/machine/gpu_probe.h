/* The GPUs of this machine, through the CUDA driver API (cuda_driver.h: libcuda.so.1, or the
 * library MSDA_LIBCUDA names).
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_GPU_PROBE_H
#define MD_GPU_PROBE_H

#include <stddef.h>
#include "base/status.h"

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

/* Fills OUT. A machine without a driver is MD_ERR_UNSUPPORTED with the reason (no library,
 * cuInit failing with its error name); zero GPUs with a working driver is MD_OK. */
md_status md_gpu_probe_run(md_gpu_probe *out, md_error *err);

void md_gpu_probe_free(md_gpu_probe *probe);

#endif
