#include "cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each slot of md_libcuda, the symbol that fills it and the group that needs it (0: optional).
 * The _v2 names are the ABI that the unsuffixed names in cuda.h map to. */
static const struct {
    const char *symbol;
    size_t offset;
    unsigned group;
} ENTRY_POINTS[] = {
    { "cuGetErrorName", offsetof(md_libcuda, get_error_name), 0 },
    { "cuDeviceGetCount", offsetof(md_libcuda, device_get_count), MD_CUDA_DEVICES },
    { "cuDeviceGet", offsetof(md_libcuda, device_get), MD_CUDA_DEVICES },
    { "cuDeviceGetName", offsetof(md_libcuda, device_get_name), MD_CUDA_DEVICES },
    { "cuDeviceGetAttribute", offsetof(md_libcuda, device_get_attribute), MD_CUDA_DEVICES },
    { "cuDeviceTotalMem_v2", offsetof(md_libcuda, device_total_mem), 0 },
    { "cuDevicePrimaryCtxRetain", offsetof(md_libcuda, primary_ctx_retain), MD_CUDA_COMPUTE },
    { "cuDevicePrimaryCtxRelease_v2", offsetof(md_libcuda, primary_ctx_release), MD_CUDA_COMPUTE },
    { "cuCtxSetCurrent", offsetof(md_libcuda, ctx_set_current), MD_CUDA_COMPUTE },
    { "cuMemAlloc_v2", offsetof(md_libcuda, mem_alloc), MD_CUDA_COMPUTE },
    { "cuMemFree_v2", offsetof(md_libcuda, mem_free), MD_CUDA_COMPUTE },
    { "cuMemcpyHtoD_v2", offsetof(md_libcuda, memcpy_htod), MD_CUDA_COMPUTE },
    { "cuMemcpyDtoH_v2", offsetof(md_libcuda, memcpy_dtoh), MD_CUDA_COMPUTE },
    { "cuCtxSynchronize", offsetof(md_libcuda, ctx_synchronize), MD_CUDA_COMPUTE },
};

static void *slot(const md_libcuda *cuda, size_t offset)
{
    void *fn;
    memcpy(&fn, (const char *)cuda + offset, sizeof fn);
    return fn;
}

const char *md_libcuda_error_name(const md_libcuda *cuda, int code)
{
    const char *name = NULL;
    if (cuda->get_error_name && cuda->get_error_name(code, &name) == 0 && name)
        return name;
    return "unknown CUDA error";
}

md_status md_libcuda_require(const md_libcuda *cuda, unsigned needs, md_error *err)
{
    for (size_t i = 0; i < sizeof ENTRY_POINTS / sizeof *ENTRY_POINTS; i++)
        if ((ENTRY_POINTS[i].group & needs) && !slot(cuda, ENTRY_POINTS[i].offset))
            return md_fail(err, MD_ERR_UNSUPPORTED, "'%s' lacks %s of the CUDA driver API", cuda->path,
                           ENTRY_POINTS[i].symbol);
    return MD_OK;
}

md_status md_libcuda_open(md_libcuda *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    const char *path = getenv("MSDA_LIBCUDA");
    snprintf(out->path, sizeof out->path, "%s", path && *path ? path : "libcuda.so.1");
    out->lib = dlopen(out->path, RTLD_NOW | RTLD_LOCAL);
    if (!out->lib)
        return md_fail(err, MD_ERR_UNSUPPORTED, "no CUDA driver: %s", dlerror());
    *(void **)&out->init = dlsym(out->lib, "cuInit");
    *(void **)&out->driver_get_version = dlsym(out->lib, "cuDriverGetVersion");
    if (!out->init || !out->driver_get_version) {
        dlclose(out->lib); /* cuInit never ran: nothing of it can dangle */
        out->lib = NULL;
        return md_fail(err, MD_ERR_UNSUPPORTED, "'%s' lacks the CUDA driver API", out->path);
    }
    for (size_t i = 0; i < sizeof ENTRY_POINTS / sizeof *ENTRY_POINTS; i++) {
        void *fn = dlsym(out->lib, ENTRY_POINTS[i].symbol);
        memcpy((char *)out + ENTRY_POINTS[i].offset, &fn, sizeof fn);
    }
    /* asked before cuInit: it answers without a device, and says which CUDA the driver is for */
    if (out->driver_get_version(&out->driver_version) != 0)
        out->driver_version = 0;
    out->init_result = out->init(0);
    return MD_OK;
}
