#include "gpu_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_driver.h"

md_status md_gpu_probe_run(md_gpu_probe *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    md_libcuda cuda;
    md_status st = md_libcuda_open(&cuda, err);
    snprintf(out->library, sizeof out->library, "%s", cuda.path);
    if (st != MD_OK)
        return st;
    if ((st = md_libcuda_require(&cuda, MD_CUDA_DEVICES, err)) != MD_OK)
        return st;
    out->driver_version = cuda.driver_version;
    int rc = cuda.init_result;
    if (rc == MD_CUDA_ERROR_NO_DEVICE) /* a working driver on a machine without GPUs */
        return MD_OK;
    if (rc != 0) {
        st = md_fail(err, MD_ERR_UNSUPPORTED, "cuInit failed: %s (%d)%s", md_libcuda_error_name(&cuda, rc), rc,
                     rc == MD_CUDA_ERROR_STUB_LIBRARY ? ": the toolkit's stub libcuda was loaded, not a driver" : "");
        goto end;
    }
    int n = 0;
    if ((rc = cuda.device_get_count(&n)) != 0) {
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
        if (cuda.device_get(&dev, i) != 0 || cuda.device_get_name(g->name, (int)sizeof g->name, dev) != 0 ||
            cuda.device_get_attribute(&major, MD_CU_ATTR_COMPUTE_CAPABILITY_MAJOR, dev) != 0 ||
            cuda.device_get_attribute(&minor, MD_CU_ATTR_COMPUTE_CAPABILITY_MINOR, dev) != 0)
            continue;
        g->name[sizeof g->name - 1] = '\0';
        g->sm = (unsigned)(major * 10 + minor);
        if (cuda.device_get_attribute(&v, MD_CU_ATTR_MULTIPROCESSOR_COUNT, dev) == 0)
            g->multiprocessors = (unsigned)v;
        if (cuda.device_get_attribute(&v, MD_CU_ATTR_MAX_REGISTERS_PER_BLOCK, dev) == 0)
            g->registers_per_block = (unsigned)v;
        if (cuda.device_get_attribute(&v, MD_CU_ATTR_MAX_THREADS_PER_BLOCK, dev) == 0)
            g->max_threads_per_block = (unsigned)v;
        size_t bytes = 0;
        if (cuda.device_total_mem && cuda.device_total_mem(&bytes, dev) == 0)
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
