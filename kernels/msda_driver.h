/* The CUDA driver API, opened from libcuda.so.1 with dlopen at first use: no link-time
 * dependency, so the library loads where no driver is installed. Needs only cuda.h to build. */
#ifndef MSDA_DRIVER_H
#define MSDA_DRIVER_H

#include <cuda.h>

#include "msda.h"

typedef struct msda_driver {
    CUresult (*Init)(unsigned int flags);
    CUresult (*DriverGetVersion)(int *version); /* NULL in a driver without it (fakes) */
    CUresult (*GetErrorName)(CUresult r, const char **name);
    CUresult (*GetErrorString)(CUresult r, const char **text);
    CUresult (*CtxGetCurrent)(CUcontext *ctx);
    CUresult (*CtxGetDevice)(CUdevice *dev);
    CUresult (*CtxGetId)(CUcontext ctx, unsigned long long *id); /* NULL before CUDA 12.0 */
    CUresult (*DeviceGetAttribute)(int *v, CUdevice_attribute a, CUdevice dev);
    CUresult (*ModuleLoadData)(CUmodule *mod, const void *image);
    CUresult (*ModuleUnload)(CUmodule mod);
    CUresult (*ModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
    CUresult (*ModuleGetGlobal)(CUdeviceptr *ptr, size_t *bytes, CUmodule mod, const char *name);
    CUresult (*MemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
    CUresult (*MemsetD8Async)(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
    CUresult (*LaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                             void **extra);
    CUresult (*FuncGetAttribute)(int *v, CUfunction_attribute a, CUfunction fn);
    CUresult (*OccupancyMaxPotentialBlockSize)(int *min_grid, int *block, CUfunction fn,
                                               CUoccupancyB2DSize smem_fn, size_t smem,
                                               int block_limit);
    CUresult (*MemAlloc)(CUdeviceptr *ptr, size_t bytes);
    CUresult (*MemFree)(CUdeviceptr ptr);
    CUresult (*MemAllocAsync)(CUdeviceptr *ptr, size_t bytes, CUstream s); /* NULL before 11.2 */
    CUresult (*MemFreeAsync)(CUdeviceptr ptr, CUstream s);                /* NULL before 11.2 */
    CUresult (*StreamSynchronize)(CUstream s);
} msda_driver;

/* The driver's entry points, loaded once per process; on failure, the status of that first
 * attempt (MSDA_ERR_NO_DRIVER, MSDA_ERR_DRIVER_TOO_OLD or a failed cuInit) every time. */
msda_status msda_driver_get(const msda_driver **drv, msda_error *err);

/* Fills *err with MSDA_ERR_CUDA (or `status` if not MSDA_ERR_CUDA), the result, its name and
 * message, and "what: NAME: message"; returns the status. */
msda_status msda_cuda_fail(msda_error *err, const msda_driver *drv, msda_status status, CUresult r,
                           const char *what);

#endif /* MSDA_DRIVER_H */
