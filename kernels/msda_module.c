/* Loading the embedded device code once per CUDA context, thread-safely. */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "msda_module.h"
#include "msda_internal.h"

#define MSDA_MAX_CONTEXTS 64

static const char *const kernel_names[K_COUNT] = {
    [K_FWD_F32_V4] = "msda_forward_f32_v4",   [K_BWD_F32_V4] = "msda_backward_f32_v4",
    [K_FWD_F64_V2] = "msda_forward_f64_v2",   [K_BWD_F64_V2] = "msda_backward_f64_v2",
    [K_FWD_F16_V8] = "msda_forward_f16_v8",   [K_FWD_F16_V4] = "msda_forward_f16_v4",
    [K_BWD_F16_V8] = "msda_backward_f16_v8",  [K_BWD_F16_V4] = "msda_backward_f16_v4",
    [K_FWD_BF16_V8] = "msda_forward_bf16_v8", [K_FWD_BF16_V4] = "msda_forward_bf16_v4",
    [K_BWD_BF16_V8] = "msda_backward_bf16_v8", [K_BWD_BF16_V4] = "msda_backward_bf16_v4",
    [K_CONVERT_F16] = "msda_convert_f16",     [K_CONVERT_BF16] = "msda_convert_bf16",
    [K_BWDBUF_F16_V4] = "msda_backward_f16_buffer_v4",
    [K_BWDBUF_BF16_V4] = "msda_backward_bf16_buffer_v4",
    [K_FWD_F16C32_V8] = "msda_forward_f16c32_v8",
    [K_BWD_F16C32_V8] = "msda_backward_f16c32_v8",
    [K_FWD_BF16C32_V8] = "msda_forward_bf16c32_v8",
    [K_BWD_BF16C32_V8] = "msda_backward_bf16c32_v8",
    [K_SFWD_F32_V4] = "msda_forward_softmax_f32_v4",
    [K_SBWD_F32_V4] = "msda_backward_softmax_f32_v4",
    [K_SFWD_F64_V2] = "msda_forward_softmax_f64_v2",
    [K_SBWD_F64_V2] = "msda_backward_softmax_f64_v2",
    [K_SFWD_F16_V8] = "msda_forward_softmax_f16_v8",
    [K_SFWD_F16_V4] = "msda_forward_softmax_f16_v4",
    [K_SBWD_F16_V8] = "msda_backward_softmax_f16_v8",
    [K_SBWD_F16_V4] = "msda_backward_softmax_f16_v4",
    [K_SFWD_BF16_V8] = "msda_forward_softmax_bf16_v8",
    [K_SFWD_BF16_V4] = "msda_forward_softmax_bf16_v4",
    [K_SBWD_BF16_V8] = "msda_backward_softmax_bf16_v8",
    [K_SBWD_BF16_V4] = "msda_backward_softmax_bf16_v4",
    [K_SBWDBUF_F16_V4] = "msda_backward_softmax_f16_buffer_v4",
    [K_SBWDBUF_BF16_V4] = "msda_backward_softmax_bf16_buffer_v4",
    [K_SFWD_F16C32_V8] = "msda_forward_softmax_f16c32_v8",
    [K_SBWD_F16C32_V8] = "msda_backward_softmax_f16c32_v8",
    [K_SFWD_BF16C32_V8] = "msda_forward_softmax_bf16c32_v8",
    [K_SBWD_BF16C32_V8] = "msda_backward_softmax_bf16c32_v8",
    [K_BWDHALF_BF16_V8] = "msda_backward_bf16_half_v8",
    [K_BWDHALF_BF16_V4] = "msda_backward_bf16_half_v4",
    [K_BWDHALF_BF16C32_V8] = "msda_backward_bf16c32_half_v8",
    [K_SBWDHALF_BF16_V8] = "msda_backward_softmax_bf16_half_v8",
    [K_SBWDHALF_BF16_V4] = "msda_backward_softmax_bf16_half_v4",
    [K_SBWDHALF_BF16C32_V8] = "msda_backward_softmax_bf16c32_half_v8",
    [K_HALF_BOUNDS_BF16] = "msda_half_bounds_bf16",
    [K_HALF_BOUNDS_BF16C32] = "msda_half_bounds_bf16c32",
    [K_FINISH_HALF_BF16] = "msda_finish_half_bf16",
    [K_GATHER_F16] = "msda_gather_replicas_f16",
    [K_ZERO_F16] = "msda_zero_backward_f16",
    [K_ZERO_BF16] = "msda_zero_backward_bf16",
    [K_BWDX_F32_V4] = "msda_backward_f32_exact_v4",
    [K_BWDX_F64_V2] = "msda_backward_f64_exact_v2",
    [K_BWDX_F16_V4] = "msda_backward_f16_exact_v4",
    [K_BWDX_BF16_V4] = "msda_backward_bf16_exact_v4",
    [K_SBWDX_F32_V4] = "msda_backward_softmax_f32_exact_v4",
    [K_SBWDX_F64_V2] = "msda_backward_softmax_f64_exact_v2",
    [K_SBWDX_F16_V4] = "msda_backward_softmax_f16_exact_v4",
    [K_SBWDX_BF16_V4] = "msda_backward_softmax_bf16_exact_v4",
    [K_XBOUNDS_F32] = "msda_exact_bounds_f32",
    [K_XBOUNDS_F64] = "msda_exact_bounds_f64",
    [K_XBOUNDS_F16] = "msda_exact_bounds_f16",
    [K_XBOUNDS_F16C32] = "msda_exact_bounds_f16c32",
    [K_XBOUNDS_BF16] = "msda_exact_bounds_bf16",
    [K_XBOUNDS_BF16C32] = "msda_exact_bounds_bf16c32",
    [K_XFINISH_F32] = "msda_exact_finish_f32",
    [K_XFINISH_F64] = "msda_exact_finish_f64",
    [K_XFINISH_F16] = "msda_exact_finish_f16",
    [K_XFINISH_BF16] = "msda_exact_finish_bf16",
    [K_RESTRIDE] = "msda_restride",
};

/* Each forward kernel msda_forward_REST has a points twin, msda_forward_points_REST
 * (msda_kernels.cu): the same launch, for problems of the forward's fast path. */
#define FORWARD_PREFIX "msda_forward_"
#define POINTS_PREFIX "msda_forward_points_"
static char points_names[K_COUNT][64];
static int points_named; /* under modules_lock */

static int is_forward(msda_kernel_id k) {
    return strncmp(kernel_names[k], FORWARD_PREFIX, strlen(FORWARD_PREFIX)) == 0;
}

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static msda_module modules[MSDA_MAX_CONTEXTS];
static int module_count;

static int buffered(int strategy) { return strategy == MSDA_ATOMIC_F32_BUFFER || strategy == MSDA_ATOMIC_MIXED; }

/* Whether the device code built with `cfg` has kernel k (msda_kernels.cu compiles the 16-bit
 * kernels only where enabled, the all-buffer backward only for buffering strategies, and the
 * mixed 16-bit backward not for the f32-buffer strategy, where the all-buffer one takes it all). */
static int kernel_built(const msda_device_config *cfg, msda_kernel_id k) {
    switch (k) {
    case K_FWD_F16_V8: case K_FWD_F16_V4: case K_CONVERT_F16:
    case K_SFWD_F16_V8: case K_SFWD_F16_V4:
    case K_FWD_F16C32_V8: case K_SFWD_F16C32_V8:
        return cfg->f16_enabled;
    case K_BWD_F16_V8: case K_BWD_F16_V4:
    case K_SBWD_F16_V8: case K_SBWD_F16_V4:
    case K_BWD_F16C32_V8: case K_SBWD_F16C32_V8:
        return cfg->f16_enabled && cfg->f16_atomic != MSDA_ATOMIC_F32_BUFFER; /* else the all-buffer kernel */
    case K_FWD_BF16_V8: case K_FWD_BF16_V4: case K_CONVERT_BF16:
    case K_SFWD_BF16_V8: case K_SFWD_BF16_V4:
    case K_FWD_BF16C32_V8: case K_SFWD_BF16C32_V8:
        return cfg->bf16_enabled;
    case K_BWD_BF16_V8: case K_BWD_BF16_V4:
    case K_SBWD_BF16_V8: case K_SBWD_BF16_V4:
    case K_BWD_BF16C32_V8: case K_SBWD_BF16C32_V8:
        /* else half sums or the all-buffer kernel */
        return cfg->bf16_enabled && !cfg->bf16_half_sums && cfg->bf16_atomic != MSDA_ATOMIC_F32_BUFFER;
    case K_BWDBUF_F16_V4: case K_SBWDBUF_F16_V4:
        return cfg->f16_enabled && buffered(cfg->f16_atomic);
    case K_BWDBUF_BF16_V4: case K_SBWDBUF_BF16_V4:
        return cfg->bf16_enabled && buffered(cfg->bf16_atomic);
    case K_BWDHALF_BF16_V8: case K_BWDHALF_BF16_V4:
    case K_SBWDHALF_BF16_V8: case K_SBWDHALF_BF16_V4:
    case K_BWDHALF_BF16C32_V8: case K_SBWDHALF_BF16C32_V8:
    case K_HALF_BOUNDS_BF16: case K_HALF_BOUNDS_BF16C32: case K_FINISH_HALF_BF16:
        return cfg->bf16_enabled && cfg->bf16_half_sums;
    case K_BWDX_F16_V4: case K_SBWDX_F16_V4:
    case K_XBOUNDS_F16: case K_XBOUNDS_F16C32: case K_XFINISH_F16:
        return cfg->f16_enabled;
    case K_BWDX_BF16_V4: case K_SBWDX_BF16_V4:
    case K_XBOUNDS_BF16: case K_XBOUNDS_BF16C32: case K_XFINISH_BF16:
        return cfg->bf16_enabled;
    case K_GATHER_F16: case K_ZERO_F16:
        return cfg->f16_enabled && cfg->f16_replica_adds > 0;
    case K_ZERO_BF16:
        return cfg->bf16_enabled && cfg->bf16_half_sums && cfg->bf16_replica_adds > 0;
    default:
        return 1;
    }
}

/* The part whose module holds kernel NAME (msda_parts.h, msda_kernels.cu): f16's kernels and
 * bf16's deterministic backward are in MSDA_PART_F16, the rest in MSDA_PART_MAIN. Every f16
 * kernel's name has "_f16" ("_bf16" does not), every deterministic one's "exact". */
static int kernel_part(const char *name) {
    if (strstr(name, "_f16") || (strstr(name, "_bf16") && strstr(name, "exact"))) return MSDA_PART_F16;
    return MSDA_PART_MAIN;
}

/* The current context's compute capability as major * 10 + minor, or -1 when unknown. */
static int context_cc(const msda_driver *drv) {
    CUdevice dev;
    int major = 0, minor = 0;
    if (drv->CtxGetDevice(&dev) != CUDA_SUCCESS ||
        drv->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
        drv->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS)
        return -1;
    return major * 10 + minor;
}

/* Looks kn->name up in the module, with its launch size. */
static msda_status load_kernel(const msda_driver *drv, CUmodule module, msda_kernel *kn, msda_error *err) {
    CUresult r = drv->ModuleGetFunction(&kn->fn, module, kn->name);
    if (r != CUDA_SUCCESS) {
        kn->fn = NULL;
        return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, kn->name);
    }
    /* The block size that gives the most resident threads for this kernel's registers on this
     * device, never over its own launch limit: the launch cannot run out of resources. */
    int min_grid = 0, block = 0, limit = 0;
    r = drv->FuncGetAttribute(&limit, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kn->fn);
    if (r == CUDA_SUCCESS) r = drv->OccupancyMaxPotentialBlockSize(&min_grid, &block, kn->fn, NULL, 0, limit);
    if (r != CUDA_SUCCESS) return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, kn->name);
    block -= block % 32;
    if (block < 32 || limit < 32) {
        return msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE,
                         "%s cannot run a whole warp per block on this device (limit %d)", kn->name, limit);
    }
    kn->block = block;
    kn->min_grid = min_grid > 0 ? min_grid : 1;
    return MSDA_OK;
}

/* The driver's CUDA version (cuDriverGetVersion: 12020 for 12.2), or 0 when it cannot say. */
static int driver_cuda_version(const msda_driver *drv) {
    int v = 0;
    if (!drv->DriverGetVersion || drv->DriverGetVersion(&v) != CUDA_SUCCESS || v < 0) return 0;
    return v;
}

void msda_fatbin_label(uint32_t index, char *buf, size_t size) {
    const msda_fatbin_ref *f = &msda_fatbin_table[index];
    if (f->ptx_isa)
        snprintf(buf, size, "PTX ISA %u.%u", f->ptx_isa / 10, f->ptx_isa % 10);
    else
        snprintf(buf, size, "CUDA %u.%u SASS", f->toolkit / 1000, (f->toolkit % 1000) / 10);
}

int msda_fatbin_describe(int index, char *buf, size_t size) {
    if (index < 0 || (uint32_t)index >= msda_fatbin_table_count) return -1;
    char label[32];
    const uint32_t needs = msda_fatbin_table[index].needs_cuda;
    msda_fatbin_label((uint32_t)index, label, sizeof label);
    return snprintf(buf, size, "%s, driver CUDA >= %u.%u", label, needs / 1000, (needs % 1000) / 10);
}

int msda_fatbin_key(int index, char *buf, size_t size) {
    if (index < 0 || (uint32_t)index >= msda_fatbin_table_count) return -1;
    const msda_fatbin_ref *f = &msda_fatbin_table[index];
    if (f->ptx_isa) return snprintf(buf, size, "ptx:%u.%u", f->ptx_isa / 10, f->ptx_isa % 10);
    return snprintf(buf, size, "sass:%u.%u", f->toolkit / 1000, (f->toolkit % 1000) / 10);
}

/* Whether FORCE has MSDA_IMAGE's form, "sass:X.Y" or "ptx:X.Y", which msda_fatbin_key writes. */
static int image_key_valid(const char *force) {
    unsigned major, minor;
    int used = 0;
    const char *version = strncmp(force, "sass:", 5) == 0 ? force + 5 : strncmp(force, "ptx:", 4) == 0 ? force + 4 : NULL;
    return version && sscanf(version, "%u.%u%n", &major, &minor, &used) == 2 && !version[used];
}

/* What a driver answers for an image it cannot take: an image of a newer format or toolkit
 * (200, 300), no code for the device (209), PTX it cannot JIT (218, 222). The next may load. */
static int image_refused(CUresult r) {
    return r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_INVALID_SOURCE || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
           r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
}

/* The driver's name for R, or "refused" when it has none. */
static const char *result_name(const msda_driver *drv, CUresult r) {
    const char *name = NULL;
    if (!drv->GetErrorName || drv->GetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "refused";
    return name;
}

static void append(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t size, const char *fmt, ...) {
    const size_t len = strlen(buf);
    if (len + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, size - len, fmt, ap);
    va_end(ap);
}

static void unload_parts(const msda_driver *drv, msda_module *m) {
    for (int p = 0; p < MSDA_PART_COUNT; p++) {
        if (m->modules[p]) drv->ModuleUnload(m->modules[p]);
        m->modules[p] = NULL;
    }
}

/* Loads every part of image F: CUDA_SUCCESS with all of them in m->modules, or the result of
 * the first part, which decides whether the image is refused (nothing stays loaded). A later
 * part that fails where the first loaded is not a refusal (the parts are one image): *LATE
 * says which part, and the caller stops there. */
static CUresult load_parts(const msda_driver *drv, msda_module *m, const msda_fatbin_ref *f, int *late) {
    *late = -1;
    for (int p = 0; p < MSDA_PART_COUNT; p++) {
        CUresult r = drv->ModuleLoadData(&m->modules[p], f->blobs[p].data);
        if (r != CUDA_SUCCESS) {
            m->modules[p] = NULL;
            unload_parts(drv, m);
            if (p > 0) *late = p;
            return r;
        }
    }
    return CUDA_SUCCESS;
}

/* Reads MODULE's msda_config into *CFG. */
static CUresult read_config(const msda_driver *drv, CUmodule module, msda_device_config *cfg) {
    CUdeviceptr at;
    size_t bytes = 0;
    CUresult r = drv->ModuleGetGlobal(&at, &bytes, module, "msda_config");
    if (r == CUDA_SUCCESS && bytes != sizeof *cfg) r = CUDA_ERROR_INVALID_IMAGE;
    if (r == CUDA_SUCCESS) r = drv->MemcpyDtoH(cfg, at, sizeof *cfg);
    return r;
}

/* Reads and checks the loaded parts' msda_config (the same in every part), then looks up every
 * kernel the code was built with in its part's module. */
static msda_status check_module(const msda_driver *drv, msda_module *m, msda_error *err) {
    CUresult r = read_config(drv, m->modules[0], &m->config);
    if (r != CUDA_SUCCESS) return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "reading msda_config");
    for (int p = 1; p < MSDA_PART_COUNT; p++) {
        msda_device_config other;
        r = read_config(drv, m->modules[p], &other);
        if (r != CUDA_SUCCESS) return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "reading msda_config");
        if (memcmp(&other, &m->config, sizeof other) != 0)
            return msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE,
                             "device code: part %d was built with another msda_config than part 0", p);
    }
    if (m->config.abi != MSDA_DEVICE_ABI)
        return msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE,
                         "device code ABI %d, the library expects %d", m->config.abi, MSDA_DEVICE_ABI);
    if (m->config.backward_spread_log2 < 0 || m->config.backward_spread_log2 > 16)
        return msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE, "device code: backward_spread_log2 %d is not in [0, 16]",
                         m->config.backward_spread_log2);
    if (m->config.backward_head_phases_log2 < 0 || m->config.backward_head_phases_log2 > 5)
        return msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE, "device code: backward_head_phases_log2 %d is not in [0, 5]",
                         m->config.backward_head_phases_log2);
    if (m->config.bf16_half_sums && (!m->config.bf16_enabled || m->config.bf16_atomic != MSDA_ATOMIC_MIXED))
        return msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE, "device code: bf16 half sums without the mixed bf16 strategy");
    if (m->config.f16_replica_adds < 0 || m->config.bf16_replica_adds < 0 ||
        (m->config.f16_replica_adds && (!m->config.f16_enabled || m->config.f16_atomic != MSDA_ATOMIC_MIXED)) ||
        (m->config.bf16_replica_adds && !m->config.bf16_half_sums))
        return msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE,
                         "device code: f16 replicas without the mixed f16 strategy or bf16 half sums");

    for (int k = 0; k < K_COUNT; k++) {
        const int built = kernel_built(&m->config, (msda_kernel_id)k);
        m->kernels[k] = (msda_kernel){.name = kernel_names[k]};
        m->points[k] = (msda_kernel){.name = is_forward((msda_kernel_id)k) ? points_names[k] : NULL};
        if (!built) continue; /* never asked: no API error */
        const CUmodule module = m->modules[kernel_part(kernel_names[k])];
        msda_status st = load_kernel(drv, module, &m->kernels[k], err);
        if (st == MSDA_OK && m->points[k].name) st = load_kernel(drv, module, &m->points[k], err);
        if (st != MSDA_OK) return st;
    }
    return MSDA_OK;
}

/* Tries the embedded fatbins in the order build wrote them (the best code first) and keeps the
 * first that loads. A fatbin is not tried when its headers say it holds nothing the device
 * runs, or when it needs a newer driver than this one: each failed cuModuleLoadData is an API
 * error that tools such as compute-sanitizer report in the user's program. A driver that
 * still refuses one (its format, its PTX) moves on to the next. */
static msda_status load_module(const msda_driver *drv, msda_module *m, msda_error *err) {
    CUresult r = CUDA_ERROR_NO_BINARY_FOR_GPU;
    for (int p = 0; p < MSDA_PART_COUNT; p++) m->modules[p] = NULL;
    const int cc = context_cc(drv), driver = driver_cuda_version(drv);
    const char *force = getenv(MSDA_IMAGE_ENV);
    if (force && !*force) force = NULL;
    if (force && !image_key_valid(force))
        return msda_fail(err, MSDA_ERR_BAD_ARGUMENT, "%s='%s': give sass:X.Y or ptx:X.Y", MSDA_IMAGE_ENV, force);
    char why[200] = "", label[32], key[32];
    int tried = 0, forced_any = 0, loaded = 0;
    for (uint32_t i = 0; i < msda_fatbin_table_count && !loaded; i++) {
        if (msda_fatbin_table[i].parts != MSDA_PART_COUNT)
            return msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE,
                             "the library's device code was built in %u parts; its loader expects %d",
                             msda_fatbin_table[i].parts, MSDA_PART_COUNT);
        if (force) {
            msda_fatbin_key((int)i, key, sizeof key);
            if (strcmp(key, force) != 0) continue;
            forced_any = 1;
        }
        if (cc >= 0 && msda_fatbin_runs_on(i, cc) == 0) continue;
        msda_fatbin_label(i, label, sizeof label);
        const msda_fatbin_ref *f = &msda_fatbin_table[i];
        if (driver && (int)f->needs_cuda > driver) {
            append(why, sizeof why, "%s%s needs CUDA %u.%u", why[0] ? "; " : "", label, f->needs_cuda / 1000,
                   (f->needs_cuda % 1000) / 10);
            continue;
        }
        tried++;
        int late;
        r = load_parts(drv, m, f, &late);
        if (r == CUDA_SUCCESS) {
            m->fatbin = (int)i;
            loaded = 1;
        } else {
            if (late > 0) {
                char what[96];
                snprintf(what, sizeof what, "cuModuleLoadData (MSDA device code, %s, part %d)", label, late);
                return msda_cuda_fail(err, drv, MSDA_ERR_NO_KERNEL_IMAGE, r, what);
            }
            if (!image_refused(r)) return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "cuModuleLoadData (MSDA device code)");
            append(why, sizeof why, "%s%s: %s", why[0] ? "; " : "", label, result_name(drv, r));
        }
    }
    if (!loaded) {
        char device[24] = "this GPU", version[40] = "a driver of unknown version";
        if (cc >= 0) snprintf(device, sizeof device, "sm_%d", cc);
        if (driver) snprintf(version, sizeof version, "a CUDA %d.%d driver", driver / 1000, (driver % 1000) / 10);
        msda_fail(err, MSDA_ERR_NO_KERNEL_IMAGE, "no MSDA device code loads on %s with %s%s%s%s: %s",
                  device, version, force ? " (" MSDA_IMAGE_ENV "=" : "", force ? force : "", force ? ")" : "",
                  why[0] ? why : force && !forced_any ? "the library has no such image" : "no image for it");
        if (tried && r != CUDA_SUCCESS) {
            err->cuda_result = (int)r;
            snprintf(err->cuda_name, sizeof err->cuda_name, "%s", result_name(drv, r));
        }
        return MSDA_ERR_NO_KERNEL_IMAGE;
    }

    msda_status st = check_module(drv, m, err);
    if (st != MSDA_OK) unload_parts(drv, m);
    return st;
}

msda_status msda_module_get(const msda_driver *drv, const msda_module **out, msda_error *err) {
    CUcontext ctx = NULL;
    unsigned long long id = 0;
    CUresult r = drv->CtxGetCurrent(&ctx);
    if (r != CUDA_SUCCESS) return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "cuCtxGetCurrent");
    if (!ctx)
        return msda_fail(err, MSDA_ERR_NO_CONTEXT,
                         "no current CUDA context: make one current (e.g. initialise the runtime)");
    /* A context's address can be reused by a later context; its id cannot. */
    if (drv->CtxGetId) {
        r = drv->CtxGetId(ctx, &id);
        if (r != CUDA_SUCCESS) return msda_cuda_fail(err, drv, MSDA_ERR_CUDA, r, "cuCtxGetId");
    }
    msda_status st = MSDA_OK;
    pthread_mutex_lock(&modules_lock);
    int i = 0;
    while (i < module_count && !(modules[i].ctx == ctx && modules[i].ctx_id == id)) i++;
    if (i == module_count) {
        if (module_count == MSDA_MAX_CONTEXTS) {
            st = msda_fail(err, MSDA_ERR_TOO_MANY_CONTEXTS, "more than %d CUDA contexts",
                           MSDA_MAX_CONTEXTS);
        } else {
            if (!points_named) {
                points_named = 1;
                for (int k = 0; k < K_COUNT; k++) {
                    if (is_forward((msda_kernel_id)k))
                        snprintf(points_names[k], sizeof points_names[k], "%s%s", POINTS_PREFIX,
                                 kernel_names[k] + strlen(FORWARD_PREFIX));
                }
            }
            msda_module *m = &modules[i];
            *m = (msda_module){.ctx = ctx, .ctx_id = id};
            st = load_module(drv, m, err);
            if (st == MSDA_OK) module_count++; /* a failed load is retried next time */
        }
    }
    pthread_mutex_unlock(&modules_lock);
    if (st == MSDA_OK) *out = &modules[i];
    return st;
}
