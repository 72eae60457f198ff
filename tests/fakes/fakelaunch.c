/* A fake CUDA driver (soname libcuda.so.1) for libmsda's launcher tests on machines without a
 * GPU (tests/kernels/test_launch.c): it answers what msda_driver.c resolves, runs nothing, and
 * records what libmsda asks of it (launches with their grid, block and parameter block,
 * memsets, allocations), so that a test can check the launcher's choices. Device memory is
 * host memory. Its device: compute capability 9.0, FAKE_SMS multiprocessors, and every kernel
 * FAKE_BLOCKS_PER_SM blocks of 256 threads resident per multiprocessor. The module's
 * `msda_config` is what the test sets with fake_launch_set_config before libmsda's first call.
 * As a driver of a given CUDA version (fake_launch_set_device; 13.0 by default) it takes or
 * refuses each fatbin by what it holds, as real drivers do (docs/FACTS.md, "Drivers and the code
 * each toolkit writes"): SASS of the device's major architecture whose cubin format and toolkit
 * it reads (the new format of CUDA 13: 13.0 drivers; 11.x/12.x cubins: a driver of that major
 * version or newer), else PTX at or below the device whose ISA it JIT-compiles. Each loaded
 * fatbin is its own module with the code of the image it took: a kernel looked up in one module
 * while another module of the context has it (another part of libmsda's device code) is not
 * found, as on a GPU.
 * Not thread-safe: the tests call libmsda from one thread. */
#include <cuda.h>
#include <gelf.h>
#include <libelf.h>
#include <lz4.h>
#include <zstd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakelaunch.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

static int device_cc = 90, driver_version = 13000, driver_flags;
static unsigned long long context_serial = 1;
static unsigned char config[256];
static size_t config_bytes;
static const char *function_names[FAKE_LAUNCH_MAX_FUNCTIONS];
static int function_count;
static fake_launch_op ops[FAKE_LAUNCH_MAX_OPS];
static int op_count;

/* The modules of the current context: the code of the image each took (a cubin or PTX text,
 * uncompressed), freed when the test moves to another context or libmsda unloads it. A
 * module's handle is its index plus FAKE_MODULE_BASE. */
#define FAKE_MAX_MODULES 64
#define FAKE_MODULE_BASE 0x2000
static struct {
    unsigned char *code;
    size_t size;
    int is_ptx;
    unsigned char own_config[256]; /* the module's own msda_config, under FAKE_DRIVER_OWN_CONFIG */
} modules[FAKE_MAX_MODULES];
static int module_count;

static void forget_modules(void) {
    for (int i = 0; i < module_count; i++) free(modules[i].code);
    memset(modules, 0, sizeof modules);
    module_count = 0;
}

FAKE_EXPORT void fake_launch_set_config(const void *cfg, size_t bytes) {
    config_bytes = bytes < sizeof config ? bytes : sizeof config;
    memcpy(config, cfg, config_bytes);
}

FAKE_EXPORT int fake_launch_ops(const fake_launch_op **out) {
    *out = ops;
    return op_count;
}

FAKE_EXPORT void fake_launch_clear(void) { op_count = 0; }

FAKE_EXPORT void fake_launch_set_device(int cc, int cuda_version, int flags) {
    device_cc = cc;
    driver_version = cuda_version;
    driver_flags = flags;
    context_serial++; /* a new context: libmsda loads its modules again */
    forget_modules();
}

FAKE_EXPORT CUresult cuDriverGetVersion(int *version) {
    if (driver_flags & FAKE_DRIVER_HIDES_VERSION) return CUDA_ERROR_NOT_SUPPORTED;
    *version = driver_version;
    return CUDA_SUCCESS;
}

static fake_launch_op *record(fake_launch_kind kind) {
    if (op_count == FAKE_LAUNCH_MAX_OPS) return NULL;
    fake_launch_op *op = &ops[op_count++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    return op;
}

FAKE_EXPORT CUresult cuInit(unsigned int flags) { return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }

FAKE_EXPORT CUresult cuGetErrorName(CUresult r, const char **name) {
    switch (r) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_INVALID_SOURCE: *name = "CUDA_ERROR_INVALID_SOURCE"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *name = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: *name = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"; break;
    default: *name = "CUDA_ERROR_FAKE"; break;
    }
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
    (void)ctx;
    *id = context_serial;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice dev) {
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = device_cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = device_cc % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = FAKE_SMS; break;
    default: *v = 0; break;
    }
    return CUDA_SUCCESS;
}

static uint64_t rd(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* The highest PTX ISA (major * 10 + minor) a driver of CUDA version V JIT-compiles. */
static unsigned isa_of_driver(int v) {
    static const int versions[][2] = {{10020, 65}, {11000, 70}, {11010, 71}, {11040, 74}, {11080, 78},
                                      {12000, 80}, {12020, 82}, {12040, 84}, {12080, 87}, {13000, 90}};
    unsigned isa = 0;
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        if (v >= versions[i][0]) isa = (unsigned)versions[i][1];
    return isa;
}

/* The entry's payload uncompressed (LZ4-like 0x2000 or zstd 0x8000, docs/FACTS.md), in a new
 * buffer of *SIZE bytes; NULL if it cannot be read. */
static unsigned char *entry_code(const unsigned char *payload, uint64_t size, uint64_t flags, uint64_t full,
                                 size_t *out_size) {
    const int compressed = (flags & 0xA000) != 0;
    const uint64_t bytes = compressed ? full : size;
    if (bytes == 0 || bytes > (1u << 30) || size > (1u << 30)) return NULL;
    unsigned char *buf = malloc(bytes);
    if (!buf) return NULL;
    if (flags & 0x8000) {
        const size_t got = ZSTD_decompress(buf, bytes, payload, size);
        if (ZSTD_isError(got) || got != bytes) goto fail;
    } else if (flags & 0x2000) {
        if (LZ4_decompress_safe((const char *)payload, (char *)buf, (int)size, (int)bytes) != (int)bytes) goto fail;
    } else {
        memcpy(buf, payload, bytes);
    }
    *out_size = bytes;
    return buf;
fail:
    free(buf);
    return NULL;
}

/* The CUDA version that wrote a cubin of the old format (11080): its e_version is the toolkit's
 * major * 10 + minor (118 for 11.8); the payload is opened first when the fatbin compressed it.
 * 0 if unreadable. */
static int cubin_toolkit(const unsigned char *payload, uint64_t size, uint64_t flags, uint64_t full) {
    unsigned char head[64];
    if (flags & 0x2000) {
        if (full < sizeof head || full > (1u << 30) || size > (1u << 30)) return 0;
        char *buf = malloc(full);
        if (!buf) return 0;
        const int got = LZ4_decompress_safe((const char *)payload, buf, (int)size, (int)full);
        if (got >= (int)sizeof head) memcpy(head, buf, sizeof head);
        free(buf);
        if (got < (int)sizeof head) return 0;
    } else {
        if (size < sizeof head) return 0;
        memcpy(head, payload, sizeof head);
    }
    const int v = (int)rd(head + 20, 4);
    return v >= 10 ? v / 10 * 1000 + v % 10 * 10 : 0;
}

/* What this driver does with one fatbin (one container; libmsda embeds one image in each). */
FAKE_EXPORT CUresult cuModuleLoadData(CUmodule *mod, const void *image) {
    const unsigned char *p = image;
    if (!p || rd(p, 4) != 0xBA55ED50u) return CUDA_ERROR_INVALID_IMAGE;
    const uint64_t end = 16 + rd(p + 8, 8);
    CUresult best = CUDA_ERROR_NO_BINARY_FOR_GPU;
    for (uint64_t e = rd(p + 6, 2); e + 64 <= end; e += rd(p + e + 4, 4) + rd(p + e + 8, 8)) {
        const unsigned kind = (unsigned)rd(p + e, 2), minor = (unsigned)rd(p + e + 24, 2),
                       major = (unsigned)rd(p + e + 26, 2), arch = (unsigned)rd(p + e + 28, 4);
        /* A compressed payload is padded: its own size is the compressed_size field's. */
        const uint64_t flags = rd(p + e + 40, 8), full = rd(p + e + 56, 8), packed = rd(p + e + 16, 4);
        const uint64_t payload = (flags & 0xA000) && packed ? packed : rd(p + e + 8, 8);
        CUresult r;
        if (kind == 2) { /* SASS */
            if ((int)arch / 10 != device_cc / 10 || (int)arch > device_cc) continue;
            if (minor >= 8) /* the new cubin format: only 13.0 drivers parse it */
                r = driver_version >= 13000 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_IMAGE;
            else {
                const int tk = cubin_toolkit(p + e + rd(p + e + 4, 4), payload, flags, full);
                /* Minor-version compatibility: any driver of the toolkit's major version, unless
                 * this driver keeps to its own version (as Tegra's are documented to). */
                const int needs = driver_flags & FAKE_DRIVER_NO_MINOR_COMPAT ? tk : tk / 1000 * 1000;
                r = tk && driver_version >= needs ? CUDA_SUCCESS : CUDA_ERROR_INVALID_SOURCE;
            }
        } else if (kind == 1) { /* PTX */
            if ((int)arch > device_cc) continue;
            r = major * 10 + minor <= isa_of_driver(driver_version) ? CUDA_SUCCESS : CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
        } else {
            continue;
        }
        if (r == CUDA_SUCCESS) {
            if (module_count == FAKE_MAX_MODULES) return CUDA_ERROR_OUT_OF_MEMORY;
            size_t bytes = 0;
            unsigned char *code = entry_code(p + e + rd(p + e + 4, 4), payload, flags, full, &bytes);
            if (!code) return CUDA_ERROR_INVALID_IMAGE;
            modules[module_count].code = code;
            modules[module_count].size = bytes;
            modules[module_count].is_ptx = kind == 1;
            *mod = (CUmodule)(uintptr_t)(FAKE_MODULE_BASE + module_count++);
            return CUDA_SUCCESS;
        }
        best = r;
    }
    return best;
}

/* The loaded module of handle MOD, or -1. */
static int module_index(CUmodule mod) {
    const intptr_t i = (intptr_t)(uintptr_t)mod - FAKE_MODULE_BASE;
    return i >= 0 && i < module_count && modules[i].code ? (int)i : -1;
}

/* Whether module I's code defines kernel NAME: a PTX entry, or a name in a cubin's string table. */
static int module_has(int i, const char *name) {
    char pattern[160];
    const int n = modules[i].is_ptx ? snprintf(pattern, sizeof pattern, ".entry %s(", name)
                                    : snprintf(pattern, sizeof pattern, "%c%s", 0, name);
    if (n <= 0 || (size_t)n >= sizeof pattern) return 0;
    const size_t len = (size_t)n + (modules[i].is_ptx ? 0 : 1); /* a cubin's name ends with its NUL */
    return memmem(modules[i].code, modules[i].size, pattern, len) != NULL;
}

FAKE_EXPORT CUresult cuModuleUnload(CUmodule mod) {
    const int i = module_index(mod);
    if (i < 0) return CUDA_ERROR_INVALID_HANDLE;
    free(modules[i].code);
    modules[i].code = NULL;
    return CUDA_SUCCESS;
}

/* A function handle is its index in function_names, plus one. */
FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction *fn, CUmodule mod, const char *name) {
    const int m = module_index(mod);
    if (m < 0) return CUDA_ERROR_INVALID_HANDLE;
    /* The config is the test's, not the image's: a kernel that no module has may be one the
     * config claims and this image was built without, which the fake lets pass (but under
     * FAKE_DRIVER_OWN_KERNELS, where the test gives the image's own config). One that another
     * module has is in the wrong part. */
    if (!module_has(m, name)) {
        if (driver_flags & FAKE_DRIVER_OWN_KERNELS) return CUDA_ERROR_NOT_FOUND;
        for (int o = 0; o < module_count; o++)
            if (o != m && modules[o].code && module_has(o, name)) return CUDA_ERROR_NOT_FOUND;
    }
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

/* The initial bytes of the global NAME in a cubin (a __constant__ one's are in its constant bank
 * section) copied into OUT, at most CAP of them (libelf, as msda-doctor reads cubins); their
 * count, or 0 where the cubin has no such initialised symbol. */
static size_t cubin_global(unsigned char *code, size_t size, const char *name, unsigned char *out, size_t cap) {
    if (elf_version(EV_CURRENT) == EV_NONE) return 0;
    Elf *elf = elf_memory((char *)code, size);
    if (!elf) return 0;
    size_t found = 0;
    for (Elf_Scn *scn = NULL; !found && (scn = elf_nextscn(elf, scn)) != NULL;) {
        GElf_Shdr sh;
        Elf_Data *syms = gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB ? elf_getdata(scn, NULL) : NULL;
        for (size_t k = 0; syms && sh.sh_entsize && !found && k < sh.sh_size / sh.sh_entsize; k++) {
            GElf_Sym sym;
            const char *sym_name = gelf_getsym(syms, (int)k, &sym) ? elf_strptr(elf, sh.sh_link, sym.st_name) : NULL;
            if (!sym_name || strcmp(sym_name, name) != 0) continue;
            Elf_Data *data = elf_getdata(elf_getscn(elf, sym.st_shndx), NULL);
            if (data && data->d_buf && sym.st_size <= cap && sym.st_value <= data->d_size &&
                sym.st_size <= data->d_size - sym.st_value) {
                memcpy(out, (const unsigned char *)data->d_buf + sym.st_value, sym.st_size);
                found = sym.st_size;
            }
            break;
        }
    }
    elf_end(elf);
    return found;
}

/* The initial bytes of the PTX array `.b8 NAME[N] = {...}` (bytes the list leaves out are 0) into
 * OUT, at most CAP of them; their count, or 0 where the text has no such array. The text is read
 * within SIZE: a module's code need not end with a NUL. */
static size_t ptx_global(const unsigned char *code, size_t size, const char *name, unsigned char *out, size_t cap) {
    char pattern[96];
    const int n = snprintf(pattern, sizeof pattern, ".b8 %s[", name);
    if (n <= 0 || (size_t)n >= sizeof pattern) return 0;
    const unsigned char *p = memmem(code, size, pattern, (size_t)n), *end = code + size;
    if (!p) return 0;
    size_t count = 0;
    for (p += n; p < end && *p >= '0' && *p <= '9' && count <= cap; p++) count = count * 10 + (size_t)(*p - '0');
    if (count == 0 || count > cap || end - p < 5 || memcmp(p, "] = {", 5) != 0) return 0;
    memset(out, 0, count);
    p += 5;
    for (size_t i = 0; i < count && p < end && *p != '}'; i++) {
        unsigned v = 0;
        while (p < end && *p >= '0' && *p <= '9' && v < 256) v = v * 10 + (unsigned)(*p++ - '0');
        if (v > 255) return 0;
        out[i] = (unsigned char)v;
        while (p < end && (*p == ',' || *p == ' ')) p++;
    }
    return count;
}

FAKE_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *ptr, size_t *bytes, CUmodule mod, const char *name) {
    const int m = module_index(mod);
    if (m < 0) return CUDA_ERROR_INVALID_HANDLE;
    if ((driver_flags & FAKE_DRIVER_OWN_CONFIG) && strcmp(name, "msda_config") == 0) {
        unsigned char *own = modules[m].own_config;
        const size_t own_bytes = modules[m].is_ptx
                                     ? ptx_global(modules[m].code, modules[m].size, name, own, sizeof modules[m].own_config)
                                     : cubin_global(modules[m].code, modules[m].size, name, own, sizeof modules[m].own_config);
        if (!own_bytes) return CUDA_ERROR_NOT_FOUND;
        *ptr = (CUdeviceptr)(uintptr_t)own;
        *bytes = own_bytes;
        return CUDA_SUCCESS;
    }
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
