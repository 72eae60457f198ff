/* Opening libcuda.so.1 and resolving the entry points the library uses. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "msda_driver.h"
#include "msda_internal.h"

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static msda_driver driver;
static msda_status driver_status;
static msda_error driver_error;

/* Exported names: the _v2 entry points are what cuda.h maps the plain names to. */
static const struct {
    const char *name;
    size_t offset;
    int optional;
} entry_points[] = {
#define EP(field, name, optional) {name, offsetof(msda_driver, field), optional}
    EP(Init, "cuInit", 0),
    EP(DriverGetVersion, "cuDriverGetVersion", 1),
    EP(GetErrorName, "cuGetErrorName", 0),
    EP(GetErrorString, "cuGetErrorString", 0),
    EP(CtxGetCurrent, "cuCtxGetCurrent", 0),
    EP(CtxGetDevice, "cuCtxGetDevice", 0),
    EP(CtxGetId, "cuCtxGetId", 1),
    EP(DeviceGetAttribute, "cuDeviceGetAttribute", 0),
    EP(ModuleLoadData, "cuModuleLoadData", 0),
    EP(ModuleUnload, "cuModuleUnload", 0),
    EP(ModuleGetFunction, "cuModuleGetFunction", 0),
    EP(ModuleGetGlobal, "cuModuleGetGlobal_v2", 0),
    EP(MemcpyDtoH, "cuMemcpyDtoH_v2", 0),
    EP(MemsetD8Async, "cuMemsetD8Async", 0),
    EP(LaunchKernel, "cuLaunchKernel", 0),
    EP(FuncGetAttribute, "cuFuncGetAttribute", 0),
    EP(OccupancyMaxPotentialBlockSize, "cuOccupancyMaxPotentialBlockSize", 0),
    EP(MemAlloc, "cuMemAlloc_v2", 0),
    EP(MemFree, "cuMemFree_v2", 0),
    EP(MemAllocAsync, "cuMemAllocAsync", 1),
    EP(MemFreeAsync, "cuMemFreeAsync", 1),
    EP(StreamSynchronize, "cuStreamSynchronize", 0),
#undef EP
};

static void driver_open(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        driver_status = msda_fail(&driver_error, MSDA_ERR_NO_DRIVER, "cannot open libcuda.so.1: %s",
                                  why ? why : "unknown error");
        return;
    }
    for (size_t i = 0; i < sizeof entry_points / sizeof entry_points[0]; i++) {
        void *sym = dlsym(lib, entry_points[i].name);
        if (!sym && !entry_points[i].optional) {
            driver_status = msda_fail(&driver_error, MSDA_ERR_DRIVER_TOO_OLD,
                                      "libcuda.so.1 has no %s: the driver is too old",
                                      entry_points[i].name);
            return; /* the library stays open: harmless, and it may be in use elsewhere */
        }
        /* POSIX guarantees that a data pointer from dlsym converts to a function pointer. */
        memcpy((char *)&driver + entry_points[i].offset, &sym, sizeof sym);
    }
    const CUresult r = driver.Init(0);
    if (r != CUDA_SUCCESS) {
        /* The toolkit's stub library answers every call with CUDA_ERROR_STUB_LIBRARY. */
        driver_status = msda_cuda_fail(&driver_error, &driver,
                                       r == CUDA_ERROR_STUB_LIBRARY ? MSDA_ERR_NO_DRIVER : MSDA_ERR_CUDA,
                                       r, "cuInit");
        return;
    }
    driver_status = MSDA_OK;
}

msda_status msda_driver_get(const msda_driver **drv, msda_error *err) {
    pthread_once(&driver_once, driver_open);
    if (driver_status != MSDA_OK) {
        if (err) *err = driver_error;
        return driver_status;
    }
    *drv = &driver;
    return MSDA_OK;
}

msda_status msda_cuda_fail(msda_error *err, const msda_driver *drv, msda_status status, CUresult r,
                           const char *what) {
    const char *name = NULL, *text = NULL;
    if (drv && drv->GetErrorName && drv->GetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (drv && drv->GetErrorString && drv->GetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    if (!name) name = "CUDA_ERROR_UNKNOWN_CODE";
    if (!text) text = "unrecognized error code";
    msda_fail(err, status, "%s: %s (%d): %s", what, name, (int)r, text);
    if (err) {
        err->cuda_result = (int)r;
        snprintf(err->cuda_name, sizeof err->cuda_name, "%s", name);
    }
    return status;
}
