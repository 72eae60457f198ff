/* What the fake launch driver (fakelaunch.c) records, and how a test reads it (through dlsym:
 * the test loads the fake itself). */
#ifndef FAKELAUNCH_H
#define FAKELAUNCH_H

#include <stddef.h>
#include <stdint.h>

#include "msda_kparams.h"

#define FAKE_SMS 132
#define FAKE_BLOCKS_PER_SM 4
#define FAKE_LAUNCH_MAX_FUNCTIONS 256
#define FAKE_LAUNCH_MAX_OPS 64

typedef enum fake_launch_kind { FAKE_LAUNCH, FAKE_MEMSET, FAKE_ALLOC } fake_launch_kind;

typedef struct fake_launch_op {
    fake_launch_kind kind;
    const char *name;     /* FAKE_LAUNCH: the kernel */
    unsigned grid, grid_y, block; /* FAKE_LAUNCH: blocks (x, y) and threads a block */
    msda_kparams params;  /* FAKE_LAUNCH: its parameter block */
    uintptr_t address;    /* FAKE_MEMSET, FAKE_ALLOC */
    size_t bytes;         /* FAKE_MEMSET, FAKE_ALLOC */
    unsigned char value;  /* FAKE_MEMSET */
} fake_launch_op;

/* The fake's own entry points: the module's msda_config (before libmsda's first call), what
 * was recorded since the last clear, and a clear. */
void fake_launch_set_config(const void *cfg, size_t bytes);
int fake_launch_ops(const fake_launch_op **out);
void fake_launch_clear(void);
typedef void (*fake_launch_set_config_fn)(const void *cfg, size_t bytes);
typedef int (*fake_launch_ops_fn)(const fake_launch_op **out);
typedef void (*fake_launch_clear_fn)(void);
/* How the fake driver behaves beyond its version (fake_launch_set_device's FLAGS). */
#define FAKE_DRIVER_NO_MINOR_COMPAT 1 /* loads old-format SASS of its own toolkit version only */
#define FAKE_DRIVER_HIDES_VERSION 2   /* cuDriverGetVersion fails */
#define FAKE_DRIVER_OWN_KERNELS 4     /* a kernel no loaded module has is not found either, as on a
                                         GPU: for a config that is the image's own */
#define FAKE_DRIVER_OWN_CONFIG 8      /* a module's msda_config is the image's own (from its
                                         cubin's symbol or its PTX's initialiser), not the test's */

/* The device's compute capability (major * 10 + minor), the driver's CUDA version (12020) and
 * FAKE_DRIVER_* flags, in a new context: libmsda loads its module again. */
void fake_launch_set_device(int cc, int cuda_version, int flags);
typedef void (*fake_launch_set_device_fn)(int cc, int cuda_version, int flags);

#endif /* FAKELAUNCH_H */
