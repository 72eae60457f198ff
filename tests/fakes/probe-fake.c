/*
 * probe-fake.c: dlopen a CUDA driver library (the fake one, or a real libcuda.so.1) and print
 * what the msda-doctor probe would read from it, one fact per line.
 *
 *   probe-fake [LIBRARY]      LIBRARY defaults to $MSDA_LIBCUDA, then libcuda.so.1
 *
 * Exit status: 0 when cuInit succeeded, 1 when it failed (the error is printed), 2 when the
 * library or one of its symbols could not be loaded.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*init_fn)(unsigned int);
typedef int (*int_out_fn)(int *);
typedef int (*get_fn)(int *, int);
typedef int (*name_fn)(char *, int, int);
typedef int (*cc_fn)(int *, int *, int);
typedef int (*attr_fn)(int *, int, int);
typedef int (*mem_fn)(size_t *, int);
typedef int (*err_fn)(int, const char **);

static void *need(void *lib, const char *sym)
{
    void *p = dlsym(lib, sym);
    if (!p) {
        fprintf(stderr, "probe-fake: error: missing symbol '%s'\n", sym);
        exit(2);
    }
    return p;
}

static const struct { int id; const char *name; } attrs[] = {
    { 1, "max_threads_per_block" },   { 8, "smem_per_block" },
    { 10, "warp_size" },              { 12, "regs_per_block" },
    { 16, "sms" },                    { 39, "max_threads_per_sm" },
    { 75, "cc_major" },               { 76, "cc_minor" },
    { 81, "smem_per_sm" },            { 82, "regs_per_sm" },
    { 97, "smem_per_block_optin" },
};

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : getenv("MSDA_LIBCUDA");
    if (!path || !*path)
        path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "probe-fake: error: cannot load '%s': %s\n", path, dlerror());
        return 2;
    }
    init_fn cu_init;
    int_out_fn cu_version, cu_count;
    get_fn cu_get;
    name_fn cu_name;
    cc_fn cu_cc;
    attr_fn cu_attr;
    mem_fn cu_mem;
    err_fn cu_err_name, cu_err_string;
    *(void **)&cu_init = need(lib, "cuInit");
    *(void **)&cu_version = need(lib, "cuDriverGetVersion");
    *(void **)&cu_count = need(lib, "cuDeviceGetCount");
    *(void **)&cu_get = need(lib, "cuDeviceGet");
    *(void **)&cu_name = need(lib, "cuDeviceGetName");
    *(void **)&cu_cc = need(lib, "cuDeviceComputeCapability");
    *(void **)&cu_attr = need(lib, "cuDeviceGetAttribute");
    *(void **)&cu_mem = need(lib, "cuDeviceTotalMem_v2");
    *(void **)&cu_err_name = need(lib, "cuGetErrorName");
    *(void **)&cu_err_string = need(lib, "cuGetErrorString");

    int version = 0, rc = cu_version(&version);
    if (rc == 0)
        printf("driver_version: %d (CUDA %d.%d)\n", version, version / 1000, version % 1000 / 10);
    else
        printf("driver_version: error %d\n", rc);

    rc = cu_init(0);
    if (rc != 0) {
        const char *name = NULL, *text = NULL;
        cu_err_name(rc, &name);
        cu_err_string(rc, &text);
        printf("cuInit: %d %s: %s\n", rc, name ? name : "?", text ? text : "?");
        return 1;
    }
    int count = 0;
    rc = cu_count(&count);
    printf("devices: %d\n", rc == 0 ? count : -rc);
    for (int i = 0; i < count; i++) {
        int dev = -1, major = 0, minor = 0;
        char name[256];
        size_t mem = 0;
        if (cu_get(&dev, i) != 0 || cu_name(name, (int)sizeof name, dev) != 0 ||
            cu_cc(&major, &minor, dev) != 0 || cu_mem(&mem, dev) != 0) {
            printf("device %d: error\n", i);
            continue;
        }
        printf("device %d: %s, sm_%d%d, %zu MiB\n", i, name, major, minor, mem >> 20);
        for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; a++) {
            int v = 0;
            rc = cu_attr(&v, attrs[a].id, dev);
            if (rc == 0)
                printf("  %s (%d): %d\n", attrs[a].name, attrs[a].id, v);
            else
                printf("  %s (%d): error %d\n", attrs[a].name, attrs[a].id, rc);
        }
    }
    dlclose(lib);
    return 0;
}
