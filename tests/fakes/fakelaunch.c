/* A fake CUDA driver (soname libcuda.so.1) for libmsda's launcher tests on machines without a
 * GPU (tests/kernels/test_launch.c): it answers what msda_driver.c resolves, runs nothing, and
 * records what libmsda asks of it (launches with their grid, block and parameter block,
 * memsets, allocations), so that a test can check the launcher's choices. Device memory is
 * host memory. Its device: compute capability 9.0, FAKE_SMS multiprocessors, and every kernel
 * FAKE_BLOCKS_PER_SM blocks of 256 threads resident per multiprocessor. The module's
 * `msda_config` is what the test sets with fake_launch_set_config before libmsda's first call.
 * Not thread-safe: the tests call libmsda from one thread. */
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fakelaunch.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

static unsigned char config[256];
static size_t config_bytes;
static const char *function_names[FAKE_LAUNCH_MAX_FUNCTIONS];
static int function_count;
static fake_launch_op ops[FAKE_LAUNCH_MAX_OPS];
static int op_count;

FAKE_EXPORT void fake_launch_set_config(const void *cfg, size_t bytes) {
    config_bytes = bytes < sizeof config ? bytes : sizeof config;
    memcpy(config, cfg, config_bytes);
}

FAKE_EXPORT int fake_launch_ops(const fake_launch_op **out) {
    *out = ops;
    return op_count;
}

FAKE_EXPORT void fake_launch_clear(void) { op_count = 0; }

static fake_launch_op *record(fake_launch_kind kind) {
    if (op_count == FAKE_LAUNCH_MAX_OPS) return NULL;
    fake_launch_op *op = &ops[op_count++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    return op;
}

FAKE_EXPORT CUresult cuInit(unsigned int flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }

FAKE_EXPORT CUresult cuGetErrorName(CUresult r, const char **name) {
    *name = r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult r, const char **text) {
    *text = r == CUDA_SUCCESS ? "no error" : "an error of the fake driver";
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
    *ctx = (CUcontext)(uintptr_t)0x1000;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice *dev) {
    *dev = 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id) {
    *id = (unsigned long long)(uintptr_t)ctx;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice dev) {
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = FAKE_SMS; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule *mod, const void *image) {
    if (!image) return CUDA_ERROR_INVALID_IMAGE;
    *mod = (CUmodule)(uintptr_t)0x2000;
    return CUDA_SUCCESS;
}

/* A function handle is its index in function_names, plus one. */
FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction *fn, CUmodule mod, const char *name) {
    (void)mod;
    for (int i = 0; i < function_count; i++)
        if (strcmp(function_names[i], name) == 0) {
            *fn = (CUfunction)(uintptr_t)(i + 1);
            return CUDA_SUCCESS;
        }
    if (function_count == FAKE_LAUNCH_MAX_FUNCTIONS) return CUDA_ERROR_OUT_OF_MEMORY;
    function_names[function_count++] = name; /* libmsda's names are static */
    *fn = (CUfunction)(uintptr_t)function_count;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *ptr, size_t *bytes, CUmodule mod, const char *name) {
    (void)mod;
    if (strcmp(name, "msda_config") != 0 || !config_bytes) return CUDA_ERROR_NOT_FOUND;
    *ptr = (CUdeviceptr)(uintptr_t)config;
    *bytes = config_bytes;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    (void)s;
    fake_launch_op *op = record(FAKE_MEMSET);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->address = (uintptr_t)dst;
    op->bytes = n;
    op->value = v;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned smem, CUstream s, void **params, void **extra) {
    (void)s, (void)extra;
    const uintptr_t i = (uintptr_t)fn;
    if (i < 1 || i > (uintptr_t)function_count || !params || gy < 1 || gy > 65535 || gz != 1 || by != 1 || bz != 1 ||
        smem)
        return CUDA_ERROR_INVALID_VALUE;
    fake_launch_op *op = record(FAKE_LAUNCH);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->name = function_names[i - 1];
    op->grid = gx;
    op->grid_y = gy;
    op->block = bx;
    memcpy(&op->params, params[0], sizeof op->params); /* every MSDA kernel takes one msda_kparams */
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction fn) {
    (void)fn;
    *v = a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 256 : 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block, CUfunction fn,
                                                      CUoccupancyB2DSize smem_fn, size_t smem, int block_limit) {
    (void)fn, (void)smem_fn, (void)smem;
    *block = block_limit < 256 ? block_limit : 256;
    *min_grid = FAKE_SMS * FAKE_BLOCKS_PER_SM;
    return CUDA_SUCCESS;
}

static CUresult allocate(CUdeviceptr *ptr, size_t bytes, fake_launch_kind kind) {
    void *p = malloc(bytes ? bytes : 1);
    fake_launch_op *op = p ? record(kind) : NULL;
    if (!op) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->address = (uintptr_t)p;
    op->bytes = bytes;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) { return allocate(ptr, bytes, FAKE_ALLOC); }

FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *ptr, size_t bytes, CUstream s) {
    (void)s;
    return allocate(ptr, bytes, FAKE_ALLOC);
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr ptr) {
    free((void *)(uintptr_t)ptr);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream s) {
    (void)s;
    return cuMemFree_v2(ptr);
}

FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s) {
    (void)s;
    return CUDA_SUCCESS;
}
