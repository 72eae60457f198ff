/* The CUDA driver library (libcuda.so.1, opened with dlopen; never the toolkit's stub) and the
 * driver API entry points that msda-doctor calls, declared here so that no CUDA header is
 * needed. MSDA_LIBCUDA names another library (the tests' fake driver). libmsda opens the driver
 * on its own (kernels/msda_driver.c): the library stays free of src/lib.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_CUDA_DRIVER_H
#define MD_CUDA_DRIVER_H

#include <stddef.h>
#include "base/status.h"

enum {
    MD_CU_ATTR_MAX_THREADS_PER_BLOCK = 1,
    MD_CU_ATTR_MAX_REGISTERS_PER_BLOCK = 12,
    MD_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    MD_CU_ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
    MD_CU_ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    MD_CUDA_ERROR_STUB_LIBRARY = 34,
    MD_CUDA_ERROR_NO_DEVICE = 100
};

/* What a caller is about to use, for md_libcuda_require: the entry points of each group are
 * all there or the group is missing (a fake driver has the devices and nothing else). */
typedef enum {
    MD_CUDA_DEVICES = 1u << 0, /* count, get, name, attribute */
    MD_CUDA_COMPUTE = 1u << 1  /* primary contexts, memory, copies, synchronize */
} md_cuda_needs;

/* The driver library, opened and initialised, with every entry point msda-doctor uses; an
 * entry point the library lacks is NULL (md_libcuda_require says which). Results are
 * CUresults: 0 is success. */
typedef struct {
    void *lib;                   /* never closed: drivers are not made to be unloaded, and what
                                  * cuInit allocated would dangle */
    char path[256];              /* MSDA_LIBCUDA, else libcuda.so.1 */
    int driver_version;          /* cuDriverGetVersion, asked before cuInit; 0 if it failed */
    int init_result;             /* cuInit's CUresult: 0, 100 (no device), 34 (the stub), ... */

    int (*init)(unsigned);
    int (*driver_get_version)(int *);
    int (*get_error_name)(int, const char **);
    /* MD_CUDA_DEVICES */
    int (*device_get_count)(int *);
    int (*device_get)(int *, int);
    int (*device_get_name)(char *, int, int);
    int (*device_get_attribute)(int *, int, int);
    int (*device_total_mem)(size_t *, int);  /* optional in every group */
    /* MD_CUDA_COMPUTE; contexts are CUcontext, device pointers CUdeviceptr */
    int (*primary_ctx_retain)(void **, int);
    int (*primary_ctx_release)(int);
    int (*ctx_set_current)(void *);
    int (*mem_alloc)(unsigned long long *, size_t);
    int (*mem_free)(unsigned long long);
    int (*memcpy_htod)(unsigned long long, const void *, size_t);
    int (*memcpy_dtoh)(void *, unsigned long long, size_t);
    int (*ctx_synchronize)(void);
} md_libcuda;

/* Opens the driver library, binds its entry points and calls cuInit, whatever it answers (see
 * init_result). MD_ERR_UNSUPPORTED when the library cannot be opened or lacks
 * cuInit/cuDriverGetVersion. */
md_status md_libcuda_open(md_libcuda *out, md_error *err);

/* MD_OK when CUDA has every entry point of the groups in NEEDS (md_cuda_needs, or-ed), else
 * MD_ERR_UNSUPPORTED naming the library and the first one missing. */
md_status md_libcuda_require(const md_libcuda *cuda, unsigned needs, md_error *err);

/* The CUresult's name ("CUDA_ERROR_NO_DEVICE"), never NULL. */
const char *md_libcuda_error_name(const md_libcuda *cuda, int code);

#endif
