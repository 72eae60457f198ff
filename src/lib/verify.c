#include "verify.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "build.h"
#include "elf_glibc.h"
#include "cuda_driver.h"
#include "msda.h"
#include "msda_half.h"
#include "product.h"
#include "wheel.h"
#include "zip_members.h"


/* The problem: two levels of odd sizes, points inside, on and outside the maps. */
enum { N = 2, M = 2, D = 8, L = 2, P = 3, LQ = 10 };
static const int64_t SHAPES[L * 2] = { 6, 5, 3, 2 };
static const int64_t STARTS[L] = { 0, 30 };
enum { S = 36 };
enum {
    N_VALUE = N * S * M * D,
    N_LOC = N * LQ * M * L * P * 2,
    N_ATTN = N * LQ * M * L * P,
    N_OUT = N * LQ * M * D
};

static const char *const DTYPE_NAMES[MD_VERIFY_DTYPES] = { "f32", "f64", "f16", "bf16" };
static const msda_dtype DTYPES[MD_VERIFY_DTYPES] = { MSDA_F32, MSDA_F64, MSDA_F16, MSDA_BF16 };
/* A GPU is held to the CPU path on the same 16-bit inputs; the CPU path itself to the f64 result
 * on unrounded inputs, where bf16's 8-bit mantissa alone costs about 1e-2. */
static const double TOLERANCES[MD_VERIFY_DTYPES] = { 1e-5, 1e-5, 1e-2, 1e-2 };
static const double CPU_TOLERANCES[MD_VERIFY_DTYPES] = { 1e-5, 1e-5, 1e-2, 3e-2 };
static const size_t ELEMENT_SIZE[MD_VERIFY_DTYPES] = { 4, 8, 2, 2 };

typedef struct {
    const char *(*version)(void);
    int (*archs_string)(char *, size_t);
    int (*embedded)(msda_arch *, int);
    msda_status (*forward_cpu)(const msda_forward_args *, int, msda_error *);
    msda_status (*backward_cpu)(const msda_backward_args *, int, msda_error *);
    msda_status (*forward_cuda)(const msda_forward_args *, void *, msda_error *);
    msda_status (*backward_cuda)(const msda_backward_args *, void *, msda_error *);
    msda_status (*prepare)(msda_error *);
    msda_status (*loaded_fatbin)(int *, msda_error *); /* optional */
} msda_api;

/* The inputs in f64, and the f64 CPU results that every run is compared with. */
typedef struct {
    double value[N_VALUE], loc[N_LOC], attn[N_ATTN], grad_out[N_OUT];
    double out[N_OUT], grad_value[N_VALUE], grad_loc[N_LOC], grad_attn[N_ATTN];
} problem;

/* ---- numbers ------------------------------------------------------------------------------------ */

static double next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*state >> 11) / 9007199254740992.0;
}

static void *to_dtype(const double *src, size_t n, int d)
{
    void *out = malloc(n * ELEMENT_SIZE[d]);
    for (size_t i = 0; out && i < n; i++) {
        switch (DTYPES[d]) {
        case MSDA_F32: ((float *)out)[i] = (float)src[i]; break;
        case MSDA_F64: ((double *)out)[i] = src[i]; break;
        case MSDA_F16: ((uint16_t *)out)[i] = msda_f32_to_f16((float)src[i]); break;
        case MSDA_BF16: ((uint16_t *)out)[i] = msda_f32_to_bf16((float)src[i]); break;
        }
    }
    return out;
}

static double element(const void *buf, size_t i, int d)
{
    switch (DTYPES[d]) {
    case MSDA_F32: return ((const float *)buf)[i];
    case MSDA_F64: return ((const double *)buf)[i];
    case MSDA_F16: return msda_f16_to_f32(((const uint16_t *)buf)[i]);
    case MSDA_BF16: return msda_bf16_to_f32(((const uint16_t *)buf)[i]);
    }
    return NAN;
}

/* ||got - want|| / ||want||; NaN anywhere gives infinity. */
static double relative_error(const void *got, const double *want, size_t n, int d)
{
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        double g = element(got, i, d);
        if (!isfinite(g))
            return INFINITY;
        diff += (g - want[i]) * (g - want[i]);
        norm += want[i] * want[i];
    }
    return norm > 0 ? sqrt(diff / norm) : sqrt(diff);
}

static void make_problem(problem *p)
{
    uint64_t state = 20261121;
    for (size_t i = 0; i < N_VALUE; i++)
        p->value[i] = 2 * next_random(&state) - 1;
    for (size_t i = 0; i < N_LOC; i++) /* some outside [0, 1]: they must contribute zero */
        p->loc[i] = 1.2 * next_random(&state) - 0.1;
    for (size_t i = 0; i < N_ATTN; i++)
        p->attn[i] = next_random(&state);
    for (size_t i = 0; i < N_OUT; i++)
        p->grad_out[i] = 2 * next_random(&state) - 1;
}

static void fill_args(msda_forward_args *f, msda_backward_args *b, msda_dtype dtype, const void *value,
                      const void *loc, const void *attn, void *out, const void *grad_out, void *gv, void *gl, void *ga)
{
    msda_sizes sizes = { .batch = N, .spatial = S, .heads = M, .channels = D, .queries = LQ, .levels = L, .points = P };
    *f = (msda_forward_args){ .dtype = dtype, .sizes = sizes, .spatial_shapes = SHAPES, .level_start = STARTS,
                              .value = value, .sampling_locations = loc, .attention_weights = attn, .output = out };
    *b = (msda_backward_args){ .dtype = dtype, .sizes = sizes, .spatial_shapes = SHAPES, .level_start = STARTS,
                               .value = value, .sampling_locations = loc, .attention_weights = attn,
                               .grad_output = grad_out, .grad_value = gv, .grad_sampling_locations = gl,
                               .grad_attention_weights = ga };
}

/* ---- the CPU ------------------------------------------------------------------------------------ */

static md_status reference(const msda_api *api, problem *p, md_error *err)
{
    msda_forward_args f;
    msda_backward_args b;
    msda_error e;
    fill_args(&f, &b, MSDA_F64, p->value, p->loc, p->attn, p->out, p->grad_out, p->grad_value, p->grad_loc, p->grad_attn);
    if (api->forward_cpu(&f, 0, &e) != MSDA_OK || api->backward_cpu(&b, 0, &e) != MSDA_OK)
        return md_fail(err, MD_ERR_BUILD, "the CPU path fails in f64: %s", e.message);
    return MD_OK;
}

typedef struct {
    void *value, *loc, *attn, *out, *grad_out, *gv, *gl, *ga;
} host_buffers;

static void free_host(host_buffers *h)
{
    free(h->value), free(h->loc), free(h->attn), free(h->out), free(h->grad_out), free(h->gv), free(h->gl), free(h->ga);
    memset(h, 0, sizeof *h);
}

static bool alloc_host(host_buffers *h, const problem *p, int d)
{
    memset(h, 0, sizeof *h);
    h->value = to_dtype(p->value, N_VALUE, d);
    h->loc = to_dtype(p->loc, N_LOC, d);
    h->attn = to_dtype(p->attn, N_ATTN, d);
    h->grad_out = to_dtype(p->grad_out, N_OUT, d);
    h->out = malloc(N_OUT * ELEMENT_SIZE[d]);
    h->gv = malloc(N_VALUE * ELEMENT_SIZE[d]);
    h->gl = malloc(N_LOC * ELEMENT_SIZE[d]);
    h->ga = malloc(N_ATTN * ELEMENT_SIZE[d]);
    return h->value && h->loc && h->attn && h->grad_out && h->out && h->gv && h->gl && h->ga;
}

/* The CPU path's results in one data type, widened to f64: what a GPU run must match. */
typedef struct {
    double out[N_OUT], grad_value[N_VALUE], grad_loc[N_LOC], grad_attn[N_ATTN];
} results;

static void widen(const host_buffers *h, int d, results *r)
{
    for (size_t i = 0; i < N_OUT; i++)
        r->out[i] = element(h->out, i, d);
    for (size_t i = 0; i < N_VALUE; i++)
        r->grad_value[i] = element(h->gv, i, d);
    for (size_t i = 0; i < N_LOC; i++)
        r->grad_loc[i] = element(h->gl, i, d);
    for (size_t i = 0; i < N_ATTN; i++)
        r->grad_attn[i] = element(h->ga, i, d);
}

static void judge(md_verify_dtype *r, const host_buffers *h, const results *want, int d)
{
    r->forward_error = relative_error(h->out, want->out, N_OUT, d);
    double ev = relative_error(h->gv, want->grad_value, N_VALUE, d);
    double el = relative_error(h->gl, want->grad_loc, N_LOC, d);
    double ea = relative_error(h->ga, want->grad_attn, N_ATTN, d);
    r->backward_error = fmax(ev, fmax(el, ea));
    r->passed = r->forward_error <= r->tolerance && r->backward_error <= r->tolerance;
}

static void check_cpu(const msda_api *api, const problem *p, md_verify_device *dev, results *cpu)
{
    results *exact = malloc(sizeof *exact);
    if (exact) {
        memcpy(exact->out, p->out, sizeof exact->out);
        memcpy(exact->grad_value, p->grad_value, sizeof exact->grad_value);
        memcpy(exact->grad_loc, p->grad_loc, sizeof exact->grad_loc);
        memcpy(exact->grad_attn, p->grad_attn, sizeof exact->grad_attn);
    }
    snprintf(dev->device, sizeof dev->device, "CPU");
    snprintf(dev->code, sizeof dev->code, "CPU path");
    dev->passed = true;
    for (int d = 0; d < MD_VERIFY_DTYPES; d++) {
        md_verify_dtype *r = &dev->dtypes[d];
        r->dtype = DTYPE_NAMES[d];
        r->tolerance = CPU_TOLERANCES[d];
        host_buffers h;
        msda_forward_args f;
        msda_backward_args b;
        msda_error e;
        if (!alloc_host(&h, p, d) || !exact) {
            snprintf(r->error, sizeof r->error, "out of memory");
        } else {
            fill_args(&f, &b, DTYPES[d], h.value, h.loc, h.attn, h.out, h.grad_out, h.gv, h.gl, h.ga);
            if (api->forward_cpu(&f, 0, &e) != MSDA_OK || api->backward_cpu(&b, 0, &e) != MSDA_OK) {
                snprintf(r->error, sizeof r->error, "%s", e.message);
            } else {
                r->ran = true;
                judge(r, &h, exact, d);
                widen(&h, d, &cpu[d]);
            }
        }
        free_host(&h);
        dev->passed &= r->passed;
    }
    free(exact);
}

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

/* Uploads, runs forward and backward on the current context, downloads into H. */
static bool run_on_gpu(const md_libcuda *drv, const msda_api *api, host_buffers *h, int d, char *why, size_t size)
{
    size_t es = ELEMENT_SIZE[d];
    size_t counts[8] = { N_VALUE, N_LOC, N_ATTN, N_OUT, N_OUT, N_VALUE, N_LOC, N_ATTN };
    void *hosts[8] = { h->value, h->loc, h->attn, h->out, h->grad_out, h->gv, h->gl, h->ga };
    unsigned long long dev[8] = { 0 };
    bool ok = true;
    int rc = 0;
    for (int i = 0; i < 8 && ok; i++)
        ok = (rc = drv->mem_alloc(&dev[i], counts[i] * es)) == 0;
    /* The outputs go up poisoned too (poison()): an element the kernels leave unwritten fails. */
    for (int i = 0; i < 8 && ok; i++)
        ok = (rc = drv->memcpy_htod(dev[i], hosts[i], counts[i] * es)) == 0;
    if (!ok)
        snprintf(why, size, "CUDA memory: %s", md_libcuda_error_name(drv, rc));
    msda_forward_args f;
    msda_backward_args b;
    msda_error e;
    fill_args(&f, &b, DTYPES[d], (void *)(uintptr_t)dev[0], (void *)(uintptr_t)dev[1], (void *)(uintptr_t)dev[2],
              (void *)(uintptr_t)dev[3], (void *)(uintptr_t)dev[4], (void *)(uintptr_t)dev[5],
              (void *)(uintptr_t)dev[6], (void *)(uintptr_t)dev[7]);
    if (ok && (api->forward_cuda(&f, NULL, &e) != MSDA_OK || api->backward_cuda(&b, NULL, &e) != MSDA_OK)) {
        snprintf(why, size, "%s", e.message);
        ok = false;
    }
    if (ok && (rc = drv->ctx_synchronize()) != 0) {
        snprintf(why, size, "the kernels failed: %s", md_libcuda_error_name(drv, rc));
        ok = false;
    }
    for (int i = 3; i < 8 && ok; i++)
        if (i != 4 && (rc = drv->memcpy_dtoh(hosts[i], dev[i], counts[i] * es)) != 0) {
            snprintf(why, size, "copy back: %s", md_libcuda_error_name(drv, rc));
            ok = false;
        }
    for (int i = 0; i < 8; i++)
        if (dev[i])
            drv->mem_free(dev[i]);
    return ok;
}

static void poison(host_buffers *h, int d)
{
    /* 0xff bytes are NaN in every floating type we use. */
    memset(h->out, 0xff, N_OUT * ELEMENT_SIZE[d]);
    memset(h->gv, 0xff, N_VALUE * ELEMENT_SIZE[d]);
    memset(h->gl, 0xff, N_LOC * ELEMENT_SIZE[d]);
    memset(h->ga, 0xff, N_ATTN * ELEMENT_SIZE[d]);
}

static void describe_code(const msda_api *api, md_verify_device *dev)
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
    if (found > 1) /* a fatbin with several images: the driver chose among them */
        snprintf(dev->code, sizeof dev->code, "fatbin %d (the driver's choice of its %d images)", index, found);
}

static md_status check_gpus(const msda_api *api, const problem *p, const results *cpu, md_verify_report *rep,
                            md_error *err)
{
    md_libcuda drv;
    if (!load_driver(&drv, rep->gpu_note, sizeof rep->gpu_note))
        return MD_OK;
    int n = 0;
    drv.device_get_count(&n);
    if (n == 0)
        snprintf(rep->gpu_note, sizeof rep->gpu_note, "the driver sees no GPU");
    md_verify_device *grown = realloc(rep->devices, (rep->n_devices + (size_t)n) * sizeof *grown);
    if (n > 0 && !grown)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    if (n > 0)
        rep->devices = grown;
    for (int g = 0; g < n; g++) {
        md_verify_device *dev = &rep->devices[rep->n_devices++];
        memset(dev, 0, sizeof *dev);
        dev->is_gpu = true;
        int cu_dev = 0, major = 0, minor = 0;
        char name[128] = "?";
        void *ctx = NULL;
        drv.device_get(&cu_dev, g);
        drv.device_get_name(name, sizeof name, cu_dev);
        drv.device_get_attribute(&major, MD_CU_ATTR_COMPUTE_CAPABILITY_MAJOR, cu_dev);
        drv.device_get_attribute(&minor, MD_CU_ATTR_COMPUTE_CAPABILITY_MINOR, cu_dev);
        dev->sm = (unsigned)(major * 10 + minor);
        snprintf(dev->device, sizeof dev->device, "GPU %d: %s (sm_%u)", g, name, dev->sm);
        int rc = drv.primary_ctx_retain(&ctx, cu_dev);
        msda_error e;
        if (rc != 0 || drv.ctx_set_current(ctx) != 0) {
            snprintf(dev->error, sizeof dev->error, "no context: %s", md_libcuda_error_name(&drv, rc));
            continue;
        }
        if (api->prepare(&e) != MSDA_OK) {
            snprintf(dev->error, sizeof dev->error, "%s", e.message);
            drv.ctx_set_current(NULL);
            drv.primary_ctx_release(cu_dev);
            continue;
        }
        describe_code(api, dev);
        dev->passed = true;
        for (int d = 0; d < MD_VERIFY_DTYPES; d++) {
            md_verify_dtype *r = &dev->dtypes[d];
            r->dtype = DTYPE_NAMES[d];
            r->tolerance = TOLERANCES[d];
            host_buffers h;
            if (!alloc_host(&h, p, d)) {
                snprintf(r->error, sizeof r->error, "out of memory");
            } else {
                poison(&h, d);
                if (!rep->devices[0].dtypes[d].ran) {
                    snprintf(r->error, sizeof r->error, "no CPU result to compare with");
                } else if (run_on_gpu(&drv, api, &h, d, r->error, sizeof r->error)) {
                    r->ran = true;
                    judge(r, &h, &cpu[d], d);
                }
            }
            free_host(&h);
            dev->passed &= r->passed;
        }
        drv.ctx_set_current(NULL);
        drv.primary_ctx_release(cu_dev);
    }
    /* The driver stays loaded: the library under test holds its own handle to it. */
    return MD_OK;
}

/* ---- the wheel ---------------------------------------------------------------------------------- */

static md_status extract_library(const char *wheel, char *dir, size_t dir_size, char *path, size_t path_size,
                                 md_error *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, dir_size, "%s/msda-verify-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return md_fail(err, MD_ERR_IO, "cannot create a temporary folder: %s", strerror(errno));
    snprintf(path, path_size, "%s/" MD_LIBRARY_NAME, dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    md_status st = md_zip_extract(wheel, MD_LIBRARY_MEMBER, fd, err);
    if (close(fd) != 0 && st == MD_OK)
        st = md_fail(err, MD_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return st;
}

static md_status bind_api(void *lib, msda_api *api, md_error *err)
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

    char dir[4096], path[4200];
    md_status st = extract_library(wheel, dir, sizeof dir, path, sizeof path, err);
    void *lib = NULL;
    problem *p = NULL;
    results *cpu = NULL;
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
    msda_api api;
    if ((st = bind_api(lib, &api, err)) != MD_OK)
        goto end;
    snprintf(rep->library_version, sizeof rep->library_version, "%s", api.version());
    api.archs_string(rep->embedded, sizeof rep->embedded);
    if (!(p = calloc(1, sizeof *p)) || !(rep->devices = calloc(1, sizeof *rep->devices))) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    make_problem(p);
    if ((st = reference(&api, p, err)) != MD_OK)
        goto end;
    if (!(cpu = calloc(MD_VERIFY_DTYPES, sizeof *cpu))) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    rep->n_devices = 1;
    check_cpu(&api, p, &rep->devices[0], cpu);
    if ((st = check_gpus(&api, p, cpu, rep, err)) != MD_OK)
        goto end;
    rep->passed = rep->record_ok;
    for (size_t i = 0; i < rep->n_devices; i++)
        rep->passed &= rep->devices[i].passed;
end:
    free(p);
    free(cpu);
    /* The library stays loaded (a CUDA context may still refer to its module); its file goes. */
    (void)lib;
    unlink(path);
    rmdir(dir);
    return st;
}

void md_verify_report_free(md_verify_report *rep)
{
    free(rep->devices);
    memset(rep, 0, sizeof *rep);
}
