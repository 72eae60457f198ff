#include "verify.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "build/build.h"
#include "machine/cuda_driver.h"
#include "binary/elf_glibc.h"
#include "msda.h"
#include "recipes/product.h"
#include "verify_problem.h"
#include "binary/wheel_record.h"
#include "binary/zip_members.h"

/* ---- the GPUs, through the driver API ----------------------------------------------------------- */

/* The driver, with the entry points verify uses, or false with WHY saying what is missing. */
static bool load_driver(md_libcuda *cuda, char *why, size_t size)
{
    md_error err;
    if (md_libcuda_open(cuda, &err) != MD_OK) {
        snprintf(why, size, "%s", err.message);
        return false;
    }
    if (cuda->init_result != 0) {
        snprintf(why, size, "cuInit failed: %s", md_libcuda_error_name(cuda, cuda->init_result));
        return false;
    }
    if (md_libcuda_require(cuda, MD_CUDA_DEVICES | MD_CUDA_COMPUTE, &err) != MD_OK) {
        snprintf(why, size, "%s", err.message);
        return false;
    }
    return true;
}

/* Uploads H, runs forward and backward (the deterministic one where DETERMINISTIC) on the
 * current context, downloads the results into H. */
static bool run_on_gpu(const md_libcuda *drv, const md_msda_api *api, md_vp_buffers *h, bool deterministic, char *why,
                       size_t size)
{
    unsigned long long dev[MD_VP_BUFFERS] = { 0 };
    bool ok = true;
    int rc = 0;
    for (int i = 0; i < MD_VP_BUFFERS && ok; i++)
        ok = (rc = drv->mem_alloc(&dev[i], h->bytes[i])) == 0;
    /* The outputs go up poisoned too: an element the kernels leave unwritten fails. */
    for (int i = 0; i < MD_VP_BUFFERS && ok; i++)
        ok = (rc = drv->memcpy_htod(dev[i], h->buf[i], h->bytes[i])) == 0;
    if (!ok)
        snprintf(why, size, "CUDA memory: %s", md_libcuda_error_name(drv, rc));
    void *on_device[MD_VP_BUFFERS];
    for (int i = 0; i < MD_VP_BUFFERS; i++)
        on_device[i] = (void *)(uintptr_t)dev[i];
    msda_forward_args f;
    msda_backward_args b;
    msda_error e;
    md_vp_args(&f, &b, h->dtype, on_device);
    b.deterministic = deterministic;
    if (ok && (api->forward_cuda(&f, NULL, &e) != MSDA_OK || api->backward_cuda(&b, NULL, &e) != MSDA_OK)) {
        snprintf(why, size, "%s", e.message);
        ok = false;
    }
    if (ok && (rc = drv->ctx_synchronize()) != 0) {
        snprintf(why, size, "the kernels failed: %s", md_libcuda_error_name(drv, rc));
        ok = false;
    }
    for (int i = MD_VP_OUT; i < MD_VP_BUFFERS && ok; i++)
        if (i != MD_VP_GRAD_OUT && (rc = drv->memcpy_dtoh(h->buf[i], dev[i], h->bytes[i])) != 0) {
            snprintf(why, size, "copy back: %s", md_libcuda_error_name(drv, rc));
            ok = false;
        }
    for (int i = 0; i < MD_VP_BUFFERS; i++)
        if (dev[i])
            drv->mem_free(dev[i]);
    return ok;
}

static void describe_code(const md_msda_api *api, md_verify_device *dev)
{
    int index = -1;
    msda_error e;
    snprintf(dev->code, sizeof dev->code, "unknown (the library does not say which code loaded)");
    if (!api->loaded_fatbin || api->loaded_fatbin(&index, &e) != MSDA_OK || index < 0)
        return;
    msda_arch archs[256];
    int n = api->embedded(archs, 256);
    int found = 0;
    for (int i = 0; i < n && i < 256; i++) {
        if (archs[i].fatbin != index)
            continue;
        if (found++ == 0)
            snprintf(dev->code, sizeof dev->code, archs[i].is_ptx ? "compute_%d PTX (JIT)" : "sm_%d SASS", archs[i].arch);
    }
    /* Which toolkit wrote it and what it needs of the driver, where the library says. */
    char image[96];
    if (found == 1 && api->fatbin_describe && api->fatbin_describe(index, image, sizeof image) > 0)
        snprintf(dev->code + strlen(dev->code), sizeof dev->code - strlen(dev->code), ": %s", image);
    if (found > 1) /* a fatbin with several images: the driver chose among them */
        snprintf(dev->code, sizeof dev->code, "fatbin %d (the driver's choice of its %d images)", index, found);
}

/* Checks GPU G in a context of its own (the primary context, retained and released, so that the
 * library loads its module anew): with IMAGE set, only images of that kind (MSDA_IMAGE). False
 * when IMAGE was set and nothing of that kind loads here with this driver: not a failure, the
 * entry is dropped. */
static bool check_device(const md_libcuda *drv, const md_msda_api *api, const md_vp_problem *p, int g,
                         const char *image, md_verify_device *dev)
{
    memset(dev, 0, sizeof *dev);
    dev->is_gpu = true;
    int cu_dev = 0, major = 0, minor = 0;
    char name[128] = "?";
    void *ctx = NULL;
    drv->device_get(&cu_dev, g);
    drv->device_get_name(name, sizeof name, cu_dev);
    drv->device_get_attribute(&major, MD_CU_ATTR_COMPUTE_CAPABILITY_MAJOR, cu_dev);
    drv->device_get_attribute(&minor, MD_CU_ATTR_COMPUTE_CAPABILITY_MINOR, cu_dev);
    dev->sm = (unsigned)(major * 10 + minor);
    snprintf(dev->device, sizeof dev->device, "GPU %d: %s (sm_%u)%s%s", g, name, dev->sm,
             image ? ", " MD_VERIFY_IMAGE_ENV "=" : "", image ? image : "");
    int rc = drv->primary_ctx_retain(&ctx, cu_dev);
    msda_error e;
    if (rc != 0 || drv->ctx_set_current(ctx) != 0) {
        snprintf(dev->error, sizeof dev->error, "no context: %s", md_libcuda_error_name(drv, rc));
        return true;
    }
    msda_status st = api->prepare(&e);
    if (st != MSDA_OK) {
        snprintf(dev->error, sizeof dev->error, "%s", e.message);
        drv->ctx_set_current(NULL);
        drv->primary_ctx_release(cu_dev);
        return !(image && st == MSDA_ERR_NO_KERNEL_IMAGE);
    }
    describe_code(api, dev);
    dev->passed = true;
    for (int d = 0; d < MD_VERIFY_DTYPES; d++) {
        md_verify_dtype *r = &dev->dtypes[d];
        md_vp_start_gpu_dtype(r, d);
        md_vp_buffers h;
        if (!md_vp_buffers_alloc(&h, p, d)) {
            snprintf(r->error, sizeof r->error, "out of memory");
        } else if (!md_vp_cpu_ran(p, d)) {
            snprintf(r->error, sizeof r->error, "no CPU result to compare with");
        } else if (run_on_gpu(drv, api, &h, false, r->error, sizeof r->error)) {
            r->ran = true;
            md_vp_judge_gpu(r, &h, p);
        }
        md_vp_buffers_free(&h);
        /* The deterministic backward's own kernels (msda.h ABI 4): an older library would
         * take the field for padding and run the usual ones. */
        if (r->ran && api->abi_version && api->abi_version() >= 4) {
            md_verify_dtype x = *r;
            if (!md_vp_buffers_alloc(&h, p, d)) {
                snprintf(r->error, sizeof r->error, "out of memory");
                r->passed = false;
            } else if (run_on_gpu(drv, api, &h, true, r->error, sizeof r->error)) {
                md_vp_judge_gpu(&x, &h, p);
                r->deterministic_ran = true;
                r->deterministic_error = x.backward_error;
                r->passed &= x.passed;
            } else {
                r->passed = false;
            }
            md_vp_buffers_free(&h);
        }
        dev->passed &= r->passed;
    }
    drv->ctx_set_current(NULL);
    drv->primary_ctx_release(cu_dev);
    return true;
}

/* The kinds of image the library embeds ("sass:13.0", "sass:11.8", "ptx:6.5"), each once, in
 * the loader's order; 0 for a library that cannot say. */
static size_t image_kinds(const md_msda_api *api, char (*keys)[MD_VERIFY_KEY], size_t cap)
{
    size_t n = 0;
    int count = api->fatbin_key && api->fatbin_count ? api->fatbin_count() : 0;
    for (int i = 0; i < count && n < cap; i++) {
        char key[MD_VERIFY_KEY];
        const int len = api->fatbin_key(i, key, sizeof key);
        if (len <= 0 || (size_t)len >= sizeof key)
            continue;
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = strcmp(keys[k], key) == 0;
        if (!seen)
            snprintf(keys[n++], MD_VERIFY_KEY, "%s", key);
    }
    return n;
}

/* Each GPU as the library chooses for it, then once per other kind of image it carries that
 * this GPU and driver load (MSDA_IMAGE): every image a user of this machine could get. */
static md_status check_gpus(const md_msda_api *api, const md_vp_problem *p, md_verify_report *rep,
                            md_error *err)
{
    md_libcuda drv;
    if (!load_driver(&drv, rep->gpu_note, sizeof rep->gpu_note))
        return MD_OK;
    int n = 0;
    drv.device_get_count(&n);
    if (n == 0)
        snprintf(rep->gpu_note, sizeof rep->gpu_note, "the driver sees no GPU");
    char keys[MD_VERIFY_MAX_IMAGES][MD_VERIFY_KEY];
    const size_t n_keys = image_kinds(api, keys, MD_VERIFY_MAX_IMAGES);
    const char *saved = getenv(MD_VERIFY_IMAGE_ENV);
    char *restore = saved ? strdup(saved) : NULL;
    if (saved && !restore)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_status st = MD_OK;
    for (int g = 0; g < n && st == MD_OK; g++) {
        for (size_t k = 0; k <= n_keys && st == MD_OK; k++) {
            md_verify_device *grown = realloc(rep->devices, (rep->n_devices + 1) * sizeof *grown);
            if (!grown) {
                st = md_fail(err, MD_ERR_NOMEM, "out of memory");
                break;
            }
            rep->devices = grown;
            /* k == 0: the library's own choice, under whatever MSDA_IMAGE the user set. */
            const char *image = k == 0 ? NULL : keys[k - 1];
            if (image && setenv(MD_VERIFY_IMAGE_ENV, image, 1) != 0) {
                st = md_fail(err, MD_ERR_NOMEM, "cannot set %s", MD_VERIFY_IMAGE_ENV);
                break;
            }
            md_verify_device *dev = &rep->devices[rep->n_devices];
            bool keep = check_device(&drv, api, p, g, image, dev);
            if (image && restore)
                setenv(MD_VERIFY_IMAGE_ENV, restore, 1);
            else if (image)
                unsetenv(MD_VERIFY_IMAGE_ENV);
            if (keep)
                rep->n_devices++;
            if (k == 0 && saved)
                break; /* the user forced one kind: check that one only */
        }
    }
    free(restore);
    /* The driver stays loaded: the library under test holds its own handle to it. */
    return st;
}

static md_status extract_library(const char *wheel, char *dir, size_t dir_size, char *path, size_t path_size,
                                 md_error *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dir_size, "%s/msda-verify-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dir[0] = '\0';
        return md_fail(err, MD_ERR_IO, "cannot create a temporary folder: %s", strerror(errno));
    }
    snprintf(path, path_size, "%s/" MD_LIBRARY_NAME, dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    md_status st = md_zip_extract(wheel, MD_LIBRARY_MEMBER, fd, err);
    if (close(fd) != 0 && st == MD_OK)
        st = md_fail(err, MD_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return st;
}

static md_status bind_api(void *lib, md_msda_api *api, md_error *err)
{
    memset(api, 0, sizeof *api);
    void **slots[] = { (void **)&api->version, (void **)&api->archs_string, (void **)&api->embedded,
                       (void **)&api->forward_cpu, (void **)&api->backward_cpu, (void **)&api->forward_cuda,
                       (void **)&api->backward_cuda, (void **)&api->prepare };
    const char *names[] = { "msda_version", "msda_embedded_archs_string", "msda_embedded_archs", "msda_forward_cpu",
                            "msda_backward_cpu", "msda_forward_cuda", "msda_backward_cuda", "msda_cuda_prepare" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!(*slots[i] = dlsym(lib, names[i])))
            return md_fail(err, MD_ERR_FORMAT, "the wheel's libmsda.so lacks %s", names[i]);
    *(void **)&api->loaded_fatbin = dlsym(lib, "msda_cuda_loaded_fatbin");
    *(void **)&api->fatbin_describe = dlsym(lib, "msda_fatbin_describe");
    *(void **)&api->fatbin_key = dlsym(lib, "msda_fatbin_key");
    *(void **)&api->fatbin_count = dlsym(lib, "msda_fatbin_count");
    *(void **)&api->abi_version = dlsym(lib, "msda_abi_version");
    return MD_OK;
}

md_status md_verify_wheel(const char *wheel, md_verify_report *rep, md_error *err)
{
    memset(rep, 0, sizeof *rep);
    snprintf(rep->wheel, sizeof rep->wheel, "%s", wheel);
    md_error rec;
    md_error_clear(&rec);
    rep->record_ok = md_wheel_verify_record(wheel, &rec) == MD_OK;
    if (rec.code == MD_ERR_IO)
        return md_fail(err, MD_ERR_IO, "%s", rec.message);
    if (!rep->record_ok)
        snprintf(rep->record_error, sizeof rep->record_error, "%s", rec.message);

    char dir[4096] = "", path[4200] = "";
    md_status st = extract_library(wheel, dir, sizeof dir, path, sizeof path, err);
    void *lib = NULL;
    md_vp_problem *p = NULL;
    if (st != MD_OK)
        goto end;
    md_elf_glibc elf;
    md_error elf_err;
    if (md_elf_glibc_read_file(path, MD_GLIBC_FLOOR_MAJOR, MD_GLIBC_FLOOR_MINOR, &elf, &elf_err) == MD_OK) {
        const char *machine = elf.machine_name ? elf.machine_name : "another CPU";
        bool foreign = strcmp(machine, md_host_platform()) != 0;
        if (foreign)
            st = md_fail(err, MD_ERR_UNSUPPORTED, "'%s' is for %s, this machine is %s: verify it there", wheel,
                         machine, md_host_platform());
        md_elf_glibc_free(&elf);
        if (foreign)
            goto end;
    }
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        st = md_fail(err, MD_ERR_UNSUPPORTED, "cannot load the wheel's library here: %s", dlerror());
        goto end;
    }
    md_msda_api api;
    if ((st = bind_api(lib, &api, err)) != MD_OK)
        goto end;
    snprintf(rep->library_version, sizeof rep->library_version, "%s", api.version());
    api.archs_string(rep->embedded, sizeof rep->embedded);
    if (!(rep->devices = calloc(1, sizeof *rep->devices))) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    if ((st = md_vp_new(&api, &p, err)) != MD_OK)
        goto end;
    rep->n_devices = 1;
    md_vp_check_cpu(&api, p, &rep->devices[0]);
    if ((st = check_gpus(&api, p, rep, err)) != MD_OK)
        goto end;
    rep->passed = rep->record_ok;
    for (size_t i = 0; i < rep->n_devices; i++)
        rep->passed &= rep->devices[i].passed;
end:
    md_vp_free(p);
    /* The library stays loaded (a CUDA context may still refer to its module); its file goes. */
    (void)lib;
    if (path[0])
        unlink(path);
    if (dir[0])
        rmdir(dir);
    return st;
}

void md_verify_report_free(md_verify_report *rep)
{
    free(rep->devices);
    memset(rep, 0, sizeof *rep);
}
