#include "gpu_probe.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The few driver API entry points used, declared here so that no CUDA header is needed. */
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_driver_version_fn)(int *);
typedef int (*cu_device_count_fn)(int *);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_device_name_fn)(char *, int, int);
typedef int (*cu_device_attribute_fn)(int *, int, int);
typedef int (*cu_device_total_mem_fn)(size_t *, int);
typedef int (*cu_error_name_fn)(int, const char **);

enum {
    ATTR_MAX_THREADS_PER_BLOCK = 1,
    ATTR_MAX_REGISTERS_PER_BLOCK = 12,
    ATTR_MULTIPROCESSOR_COUNT = 16,
    ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
    ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100
};

const char *md_libcuda_error_name(const md_libcuda *cuda, int code)
{
    cu_error_name_fn name_of = (cu_error_name_fn)dlsym(cuda->lib, "cuGetErrorName");
    const char *name = NULL;
    if (name_of && name_of(code, &name) == 0 && name)
        return name;
    return "unknown CUDA error";
}

md_status md_libcuda_open(md_libcuda *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    const char *path = getenv("MSDA_LIBCUDA");
    snprintf(out->path, sizeof out->path, "%s", path && *path ? path : "libcuda.so.1");
    out->lib = dlopen(out->path, RTLD_NOW | RTLD_LOCAL);
    if (!out->lib)
        return md_fail(err, MD_ERR_UNSUPPORTED, "no CUDA driver: %s", dlerror());
    cu_init_fn init = (cu_init_fn)dlsym(out->lib, "cuInit");
    cu_driver_version_fn driver_version = (cu_driver_version_fn)dlsym(out->lib, "cuDriverGetVersion");
    if (!init || !driver_version) {
        dlclose(out->lib); /* cuInit never ran: nothing of it can dangle */
        out->lib = NULL;
        return md_fail(err, MD_ERR_UNSUPPORTED, "'%s' lacks the CUDA driver API", out->path);
    }
    /* asked before cuInit: it answers without a device, and says which CUDA the driver is for */
    if (driver_version(&out->driver_version) != 0)
        out->driver_version = 0;
    out->init_result = init(0);
    return MD_OK;
}

md_status md_gpu_probe_run(md_gpu_probe *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    md_libcuda cuda;
    md_status st = md_libcuda_open(&cuda, err);
    snprintf(out->library, sizeof out->library, "%s", cuda.path);
    if (st != MD_OK)
        return st;
    void *lib = cuda.lib;
    cu_device_count_fn count = (cu_device_count_fn)dlsym(lib, "cuDeviceGetCount");
    cu_device_get_fn get = (cu_device_get_fn)dlsym(lib, "cuDeviceGet");
    cu_device_name_fn name = (cu_device_name_fn)dlsym(lib, "cuDeviceGetName");
    cu_device_attribute_fn attr = (cu_device_attribute_fn)dlsym(lib, "cuDeviceGetAttribute");
    cu_device_total_mem_fn total_mem = (cu_device_total_mem_fn)dlsym(lib, "cuDeviceTotalMem_v2");
    if (!count || !get || !name || !attr)
        return md_fail(err, MD_ERR_UNSUPPORTED, "'%s' lacks the CUDA driver API", cuda.path);
    out->driver_version = cuda.driver_version;
    int rc = cuda.init_result;
    if (rc == CUDA_ERROR_NO_DEVICE) /* a working driver on a machine without GPUs */
        return MD_OK;
    if (rc != 0) {
        st = md_fail(err, MD_ERR_UNSUPPORTED, "cuInit failed: %s (%d)%s", md_libcuda_error_name(&cuda, rc), rc,
                     rc == CUDA_ERROR_STUB_LIBRARY ? ": the toolkit's stub libcuda was loaded, not a driver" : "");
        goto end;
    }
    int n = 0;
    if ((rc = count(&n)) != 0) {
        st = md_fail(err, MD_ERR_UNSUPPORTED, "cuDeviceGetCount failed: %s", md_libcuda_error_name(&cuda, rc));
        goto end;
    }
    out->gpus = calloc(n > 0 ? (size_t)n : 1, sizeof *out->gpus);
    if (!out->gpus) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    for (int i = 0; i < n; i++) {
        int dev, major = 0, minor = 0, v = 0;
        md_gpu *g = &out->gpus[out->n_gpus];
        if (get(&dev, i) != 0 || name(g->name, (int)sizeof g->name, dev) != 0 ||
            attr(&major, ATTR_COMPUTE_CAPABILITY_MAJOR, dev) != 0 || attr(&minor, ATTR_COMPUTE_CAPABILITY_MINOR, dev) != 0)
            continue;
        g->name[sizeof g->name - 1] = '\0';
        g->sm = (unsigned)(major * 10 + minor);
        if (attr(&v, ATTR_MULTIPROCESSOR_COUNT, dev) == 0)
            g->multiprocessors = (unsigned)v;
        if (attr(&v, ATTR_MAX_REGISTERS_PER_BLOCK, dev) == 0)
            g->registers_per_block = (unsigned)v;
        if (attr(&v, ATTR_MAX_THREADS_PER_BLOCK, dev) == 0)
            g->max_threads_per_block = (unsigned)v;
        size_t bytes = 0;
        if (total_mem && total_mem(&bytes, dev) == 0)
            g->memory_bytes = bytes;
        out->n_gpus++;
    }
end:
    return st;
}

void md_gpu_probe_free(md_gpu_probe *probe)
{
    free(probe->gpus);
    memset(probe, 0, sizeof *probe);
}
