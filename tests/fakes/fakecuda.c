/*
 * fakecuda.c: a fake CUDA driver library (libcuda.so.1 look-alike) for tests on machines
 * without a GPU. It answers the few driver-API calls msda-doctor's probe makes from a JSON
 * description of devices named by the environment variable MSDA_FAKE_GPUS (see
 * tests/fixtures/gpus/ and tests/fakes/README.md). Load it with MSDA_LIBCUDA=path/to/it.
 *
 * Behaviour, modelled on the real driver:
 *   - cuDriverGetVersion works without cuInit; the other device calls need a successful cuInit
 *     and answer CUDA_ERROR_NOT_INITIALIZED before it.
 *   - MSDA_FAKE_GPUS unset, unreadable or not a valid description: cuInit and
 *     cuDriverGetVersion answer CUDA_ERROR_UNKNOWN (a machine without a working driver).
 *   - "init_error": N in the description makes cuInit answer N (34 stub library,
 *     803 driver mismatch, ...); no devices makes it answer CUDA_ERROR_NO_DEVICE.
 *   - Error names and strings are those of driver 580.159.04.
 *
 * Set MSDA_FAKE_DEBUG=1 to have it say on stderr why a description was refused.
 * C11, no CUDA headers: the few types are declared here with the driver's ABI.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;

#define FAKE_EXPORT __attribute__((visibility("default")))

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_UNKNOWN = 999
};

/* CU_DEVICE_ATTRIBUTE_* values used below (cuda.h). */
enum {
    ATTR_MAX_THREADS_PER_BLOCK = 1,
    ATTR_MAX_BLOCK_DIM_X = 2,
    ATTR_MAX_BLOCK_DIM_Y = 3,
    ATTR_MAX_BLOCK_DIM_Z = 4,
    ATTR_MAX_GRID_DIM_X = 5,
    ATTR_MAX_GRID_DIM_Y = 6,
    ATTR_MAX_GRID_DIM_Z = 7,
    ATTR_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    ATTR_TOTAL_CONSTANT_MEMORY = 9,
    ATTR_WARP_SIZE = 10,
    ATTR_MAX_REGISTERS_PER_BLOCK = 12,
    ATTR_MULTIPROCESSOR_COUNT = 16,
    ATTR_INTEGRATED = 18,
    ATTR_PCI_BUS_ID = 33,
    ATTR_PCI_DEVICE_ID = 34,
    ATTR_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    ATTR_PCI_DOMAIN_ID = 50,
    ATTR_COMPUTE_CAPABILITY_MAJOR = 75,
    ATTR_COMPUTE_CAPABILITY_MINOR = 76,
    ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    ATTR_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
    ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
};

/* Exported with the driver's prototypes; declared here to satisfy -Wmissing-prototypes. */
FAKE_EXPORT CUresult cuInit(unsigned int flags);
FAKE_EXPORT CUresult cuDriverGetVersion(int *version);
FAKE_EXPORT CUresult cuDeviceGetCount(int *count);
FAKE_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal);
FAKE_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
FAKE_EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev);
FAKE_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
FAKE_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
FAKE_EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev);
FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr);
FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr);

#define FAKE_MAX_DEVICES 64
#define FAKE_NAME_MAX 256

struct fake_device {
    char name[FAKE_NAME_MAX];
    char pci_bus_id[32];
    int cc_major, cc_minor;
    long long total_mem;
    json_t *attributes; /* optional {"<id>": value} overrides; borrowed from the root */
    int sms, regs_per_block, regs_per_sm, max_threads_per_block, max_threads_per_sm;
    int warp_size, smem_per_block, smem_per_sm, smem_per_block_optin, integrated;
};

static struct {
    pthread_once_t once;
    CUresult load_result; /* CUDA_SUCCESS if the description was read */
    CUresult init_result; /* what cuInit answers */
    atomic_int initialized;
    int driver_version;
    int count;
    json_t *root;
    struct fake_device dev[FAKE_MAX_DEVICES];
} fake = { .once = PTHREAD_ONCE_INIT };

static void fake_debug(const char *what, const char *detail)
{
    const char *d = getenv("MSDA_FAKE_DEBUG");
    if (d && *d && strcmp(d, "0") != 0)
        fprintf(stderr, "fakecuda: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
}

/* An integer member, or def when absent; -1 (and *ok = 0) when present but not an integer. */
static long long get_int(json_t *obj, const char *key, long long def, int *ok)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return def;
    if (!json_is_integer(v)) {
        *ok = 0;
        return -1;
    }
    return json_integer_value(v);
}

static int parse_cc(const char *s, int *major, int *minor)
{
    char *end;
    long ma = strtol(s, &end, 10);
    if (end == s || *end != '.' || ma < 1 || ma > 99)
        return 0;
    const char *m = end + 1;
    long mi = strtol(m, &end, 10);
    if (end == m || *end != '\0' || mi < 0 || mi > 9)
        return 0;
    *major = (int)ma;
    *minor = (int)mi;
    return 1;
}

static int parse_device(json_t *j, struct fake_device *d, int ordinal)
{
    int ok = 1;
    json_t *name = json_object_get(j, "name");
    json_t *cc = json_object_get(j, "cc");
    if (!json_is_object(j) || !json_is_string(name) || !json_is_string(cc))
        return 0;
    snprintf(d->name, sizeof d->name, "%s", json_string_value(name));
    if (!parse_cc(json_string_value(cc), &d->cc_major, &d->cc_minor))
        return 0;
    json_t *pci = json_object_get(j, "pci_bus_id");
    if (json_is_string(pci))
        snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", json_string_value(pci));
    else
        snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "0000:%02X:00.0", (unsigned)(ordinal + 1));
    int small = (d->cc_major == 5 && d->cc_minor == 3) || (d->cc_major == 6 && d->cc_minor == 2);
    d->sms = (int)get_int(j, "sms", 1, &ok);
    d->regs_per_block = (int)get_int(j, "regs_per_block", small ? 32768 : 65536, &ok);
    d->regs_per_sm = (int)get_int(j, "regs_per_sm", 65536, &ok);
    d->max_threads_per_block = (int)get_int(j, "max_threads_per_block", 1024, &ok);
    d->max_threads_per_sm = (int)get_int(j, "max_threads_per_sm", 2048, &ok);
    d->warp_size = (int)get_int(j, "warp_size", 32, &ok);
    d->smem_per_block = (int)get_int(j, "smem_per_block", 49152, &ok);
    d->smem_per_sm = (int)get_int(j, "smem_per_sm", 65536, &ok);
    d->smem_per_block_optin = (int)get_int(j, "smem_per_block_optin", 49152, &ok);
    long long mb = get_int(j, "memory_mb", 0, &ok);
    d->total_mem = get_int(j, "total_mem_bytes", mb * 1048576LL, &ok);
    json_t *integ = json_object_get(j, "integrated");
    d->integrated = json_is_true(integ);
    json_t *attrs = json_object_get(j, "attributes");
    d->attributes = json_is_object(attrs) ? attrs : NULL;
    return ok && d->sms > 0 && d->total_mem >= 0;
}

static void fake_fail(const char *path, const char *why)
{
    fake_debug(path, why);
    json_decref(fake.root);
    fake.root = NULL;
    fake.count = 0;
}

static void fake_load(void)
{
    const char *path = getenv("MSDA_FAKE_GPUS");
    json_error_t err;

    fake.load_result = CUDA_ERROR_UNKNOWN;
    fake.init_result = CUDA_ERROR_UNKNOWN;
    if (!path || !*path) {
        fake_debug("MSDA_FAKE_GPUS is not set", NULL);
        return;
    }
    fake.root = json_load_file(path, 0, &err);
    if (!fake.root) {
        fake_debug(path, err.text);
        return;
    }
    int ok = 1;
    long long ver = get_int(fake.root, "driver_version", -1, &ok);
    json_t *devs = json_object_get(fake.root, "devices");
    if (!ok || ver <= 0 || !json_is_array(devs) || json_array_size(devs) > FAKE_MAX_DEVICES) {
        fake_fail(path, "needs an integer driver_version and a devices array");
        return;
    }
    for (size_t i = 0; i < json_array_size(devs); i++) {
        if (!parse_device(json_array_get(devs, i), &fake.dev[i], (int)i)) {
            fake_fail(path, "a device needs name, cc \"M.m\", integer fields and sms > 0");
            return;
        }
    }
    long long init_error = get_int(fake.root, "init_error", 0, &ok);
    if (!ok) {
        fake_fail(path, "init_error must be an integer CUresult");
        return;
    }
    fake.driver_version = (int)ver;
    fake.count = (int)json_array_size(devs);
    fake.load_result = CUDA_SUCCESS;
    if (init_error != 0)
        fake.init_result = (CUresult)init_error;
    else
        fake.init_result = fake.count > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

/* The description lives as long as the library, as a driver's state does; freed at unload so
 * that leak checkers in the tests stay quiet. */
__attribute__((destructor)) static void fake_unload(void)
{
    json_decref(fake.root);
    fake.root = NULL;
}

static CUresult fake_device(CUdevice dev, struct fake_device **out)
{
    pthread_once(&fake.once, fake_load);
    if (!fake.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dev < 0 || dev >= fake.count)
        return CUDA_ERROR_INVALID_DEVICE;
    *out = &fake.dev[dev];
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags)
{
    pthread_once(&fake.once, fake_load);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake.init_result == CUDA_SUCCESS)
        fake.initialized = 1;
    return fake.init_result;
}

CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&fake.once, fake_load);
    if (fake.load_result != CUDA_SUCCESS)
        return fake.load_result;
    *version = fake.driver_version;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&fake.once, fake_load);
    if (!fake.initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    *count = fake.count;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    struct fake_device *d;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_device(ordinal, &d);
    if (r == CUDA_SUCCESS)
        *device = ordinal;
    return r;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    struct fake_device *d;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_device(dev, &d);
    if (r == CUDA_SUCCESS)
        snprintf(name, (size_t)len, "%s", d->name);
    return r;
}

CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    struct fake_device *d;
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_device(dev, &d);
    if (r == CUDA_SUCCESS) {
        *major = d->cc_major;
        *minor = d->cc_minor;
    }
    return r;
}

static int pci_field(const char *id, int which)
{
    unsigned domain = 0, bus = 0, device = 0, function = 0;
    if (sscanf(id, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4)
        return 0;
    return (int)(which == 0 ? domain : which == 1 ? bus : device);
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    struct fake_device *d;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_device(dev, &d);
    if (r != CUDA_SUCCESS)
        return r;
    if (d->attributes) {
        char key[16];
        snprintf(key, sizeof key, "%d", (int)attrib);
        json_t *v = json_object_get(d->attributes, key);
        if (json_is_integer(v)) {
            *pi = (int)json_integer_value(v);
            return CUDA_SUCCESS;
        }
    }
    switch (attrib) {
    case ATTR_MAX_THREADS_PER_BLOCK: *pi = d->max_threads_per_block; break;
    case ATTR_MAX_BLOCK_DIM_X: *pi = 1024; break;
    case ATTR_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case ATTR_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case ATTR_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case ATTR_MAX_GRID_DIM_Y: *pi = 65535; break;
    case ATTR_MAX_GRID_DIM_Z: *pi = 65535; break;
    case ATTR_MAX_SHARED_MEMORY_PER_BLOCK: *pi = d->smem_per_block; break;
    case ATTR_TOTAL_CONSTANT_MEMORY: *pi = 65536; break;
    case ATTR_WARP_SIZE: *pi = d->warp_size; break;
    case ATTR_MAX_REGISTERS_PER_BLOCK: *pi = d->regs_per_block; break;
    case ATTR_MULTIPROCESSOR_COUNT: *pi = d->sms; break;
    case ATTR_INTEGRATED: *pi = d->integrated; break;
    case ATTR_PCI_BUS_ID: *pi = pci_field(d->pci_bus_id, 1); break;
    case ATTR_PCI_DEVICE_ID: *pi = pci_field(d->pci_bus_id, 2); break;
    case ATTR_MAX_THREADS_PER_MULTIPROCESSOR: *pi = d->max_threads_per_sm; break;
    case ATTR_PCI_DOMAIN_ID: *pi = pci_field(d->pci_bus_id, 0); break;
    case ATTR_COMPUTE_CAPABILITY_MAJOR: *pi = d->cc_major; break;
    case ATTR_COMPUTE_CAPABILITY_MINOR: *pi = d->cc_minor; break;
    case ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *pi = d->smem_per_sm; break;
    case ATTR_MAX_REGISTERS_PER_MULTIPROCESSOR: *pi = d->regs_per_sm; break;
    case ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = d->smem_per_block_optin; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    struct fake_device *d;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_device(dev, &d);
    if (r == CUDA_SUCCESS)
        *bytes = (size_t)d->total_mem;
    return r;
}

/* The unversioned symbol is the driver's legacy 32-bit entry point (cuda.h maps the name to
 * cuDeviceTotalMem_v2 at compile time); it saturates at 4 GiB - 1 here. */
CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    struct fake_device *d;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_device(dev, &d);
    if (r == CUDA_SUCCESS)
        *bytes = d->total_mem > 0xffffffffLL ? 0xffffffffu : (unsigned int)d->total_mem;
    return r;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    struct fake_device *d;
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_device(dev, &d);
    if (r == CUDA_SUCCESS)
        snprintf(pciBusId, (size_t)len, "%s", d->pci_bus_id);
    return r;
}

/* cuGetErrorName / cuGetErrorString of driver 580.159.04, read on an H200 on 2026-11-21. */
static const struct { int code; const char *name, *text; } fake_errors[] = {
    { 0, "CUDA_SUCCESS", "no error" },
    { 1, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { 3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { 4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
    { 5, "CUDA_ERROR_PROFILER_DISABLED", "profiler disabled while using external profiling tool" },
    { 6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "profiler not initialized: call cudaProfilerInitialize()" },
    { 7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "profiler already started" },
    { 8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "profiler already stopped" },
    { 34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
    { 36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "API call is not supported in the installed CUDA driver" },
    { 46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable" },
    { 100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
    { 101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { 102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "device doesn't have valid Grid license" },
    { 200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid" },
    { 201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { 202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "context already current" },
    { 205, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed" },
    { 206, "CUDA_ERROR_UNMAP_FAILED", "unmapping of buffer object failed" },
    { 207, "CUDA_ERROR_ARRAY_IS_MAPPED", "array is mapped" },
    { 208, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped" },
    { 209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device" },
    { 210, "CUDA_ERROR_ALREADY_ACQUIRED", "resource already acquired" },
    { 211, "CUDA_ERROR_NOT_MAPPED", "resource not mapped" },
    { 212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "resource not mapped as array" },
    { 213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "resource not mapped as pointer" },
    { 214, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered" },
    { 215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "limit is not supported on this architecture" },
    { 216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "exclusive-thread device already in use by a different thread" },
    { 217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices" },
    { 218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed" },
    { 219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "invalid OpenGL or DirectX context" },
    { 220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "uncorrectable NVLink error detected during the execution" },
    { 221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "PTX JIT compiler library not found" },
    { 222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain." },
    { 223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "PTX JIT compilation was disabled" },
    { 224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "the provided execution affinity is not supported" },
    { 225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "the provided PTX contains unsupported call to cudaDeviceSynchronize" },
    { 226, "CUDA_ERROR_CONTAINED", "Invalid access of peer GPU memory over nvlink or a hardware error" },
    { 300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid" },
    { 301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found" },
    { 302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found" },
    { 303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object initialization failed" },
    { 304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS" },
    { 400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { 401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
    { 402, "CUDA_ERROR_LOSSY_QUERY", "attempted introspection would be semantically lossy" },
    { 500, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { 600, "CUDA_ERROR_NOT_READY", "device not ready" },
    { 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered" },
    { 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch" },
    { 702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated" },
    { 703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "launch uses incompatible texturing mode" },
    { 704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled" },
    { 705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled" },
    { 708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "cannot set while device is active in this process" },
    { 709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed" },
    { 710, "CUDA_ERROR_ASSERT", "device-side assert triggered" },
    { 711, "CUDA_ERROR_TOO_MANY_PEERS", "peer mapping resources exhausted" },
    { 712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped" },
    { 713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region" },
    { 714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error" },
    { 715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered" },
    { 716, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address" },
    { 717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "operation not supported on global/shared address space" },
    { 718, "CUDA_ERROR_INVALID_PC", "invalid program counter" },
    { 719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure" },
    { 720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch" },
    { 721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "tensor memory not completely freed" },
    { 800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted" },
    { 801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { 802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized" },
    { 803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination" },
    { 804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility was attempted on non supported HW" },
    { 805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "MPS client failed to connect to the MPS control daemon or the MPS server" },
    { 806, "CUDA_ERROR_MPS_RPC_FAILURE", "the remote procedural call between the MPS server and the MPS client failed" },
    { 807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "MPS server is not ready to accept new MPS client requests" },
    { 808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "the hardware resources required to create MPS client have been exhausted" },
    { 809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "the hardware resources required to support device connections have been exhausted" },
    { 810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "the MPS client has been terminated by the server" },
    { 811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it" },
    { 812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "unsupported interaction between different versions of CUDA Dynamic Parallelism" },
    { 900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing" },
    { 901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture" },
    { 902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "operation would result in a merge of separate capture sequences" },
    { 903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not ended in the same stream as it began" },
    { 904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work" },
    { 905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream" },
    { 906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream" },
    { 907, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream" },
    { 908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread" },
    { 909, "CUDA_ERROR_TIMEOUT", "wait operation timed out" },
    { 910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update" },
    { 911, "CUDA_ERROR_EXTERNAL_DEVICE", "an async error has occured in external entity outside of CUDA" },
    { 912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "a kernel launch error has occurred due to cluster misconfiguration" },
    { 913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "the function handle is not loaded when calling an API that requires a loaded function" },
    { 914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "one or more resources passed in are not valid resource types for the operation" },
    { 915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "one or more resources are insufficient or non-applicable for the operation" },
    { 916, "CUDA_ERROR_KEY_ROTATION", "an error happened during the key rotation sequence" },
    { 999, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static int fake_error_index(CUresult error)
{
    for (size_t i = 0; i < sizeof fake_errors / sizeof fake_errors[0]; i++)
        if (fake_errors[i].code == error)
            return (int)i;
    return -1;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    int i = fake_error_index(error);
    *pStr = i < 0 ? NULL : fake_errors[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    int i = fake_error_index(error);
    *pStr = i < 0 ? NULL : fake_errors[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

#ifdef FAKE_COMPUTE
/* Built with -DFAKE_COMPUTE (build/fakes/compute/libcuda.so.1): the entry points that verify
 * needs to run the op on a GPU (primary contexts, memory, copies, synchronize), so that verify's
 * GPU path runs on a machine without one. Device memory is host memory; a context is its
 * device's number plus one. Nothing runs kernels: a library asking for more (cuModuleLoadData,
 * cuLaunchKernel) finds this driver too old, which verify reports for that GPU. */
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice dev);
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
FAKE_EXPORT CUresult cuCtxSetCurrent(void *ctx);
FAKE_EXPORT CUresult cuMemAlloc_v2(unsigned long long *dptr, size_t bytes);
FAKE_EXPORT CUresult cuMemFree_v2(unsigned long long dptr);
FAKE_EXPORT CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t bytes);
FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes);
FAKE_EXPORT CUresult cuCtxSynchronize(void);

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice dev)
{
    struct fake_device *d;
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fake_device(dev, &d);
    if (r == CUDA_SUCCESS)
        *ctx = (void *)(ptrdiff_t)(dev + 1);
    return r;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    struct fake_device *d;
    return fake_device(dev, &d);
}

CUresult cuCtxSetCurrent(void *ctx)
{
    (void)ctx;
    return fake.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult cuMemAlloc_v2(unsigned long long *dptr, size_t bytes)
{
    if (!dptr || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = malloc(bytes);
    if (!p)
        return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    *dptr = (unsigned long long)(size_t)p;
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(unsigned long long dptr)
{
    free((void *)(size_t)dptr);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t bytes)
{
    memcpy((void *)(size_t)dst, src, bytes);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes)
{
    memcpy(dst, (const void *)(size_t)src, bytes);
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    return CUDA_SUCCESS;
}
#endif
