/* kernels/libmsda.json: how libmsda is compiled and linked, as a typed table. kernels/ owns the
 * description; `build` reads it from the source folder it builds, so a flag or a knob is one
 * edit there, and the library the make targets test is the one the wheel ships.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_LIBMSDA_RECIPE_H
#define MD_LIBMSDA_RECIPE_H

#include <stdbool.h>
#include <stddef.h>
#include "arch.h"
#include "base/status.h"

#define MD_RECIPE_FILE "libmsda.json"
#define MD_MAX_KNOBS 16
#define MD_KNOB_NAME_MAX 48
#define MD_MAX_PARTS 8 /* parts of the device code (libmsda.json device.parts) */

/* The architecture fact a knob's value follows (recipes/architectures.json). */
typedef enum {
    MD_FACT_NONE,                /* the same value everywhere the table knows */
    MD_FACT_THREADS_AT_MAX_REGISTERS, /* the value itself: md_arch_threads_at_max_registers */
    MD_FACT_HALF_ATOMIC_ADD,     /* "yes" where atomicAdd on __half exists */
    MD_FACT_BF16                 /* "yes" where bf16 arithmetic and atomics exist */
} md_arch_fact;

typedef struct {
    char name[MD_KNOB_NAME_MAX];  /* the macro: "MSDA_MAX_THREADS" */
    md_arch_fact fact;
    long when_fact, otherwise;    /* the value where the fact holds, and where it does not
                                     (a fact that is a value itself needs neither) */
    long unknown;                 /* for an architecture the table lacks */
} md_knob_rule;

typedef enum {
    MD_PTX_NEWEST = 1,            /* PTX of the newest SASS: the best code for later GPUs */
    MD_PTX_OLDEST_OF_NEWEST = 2   /* PTX of the oldest SASS the newest toolkit targets: JIT-able
                                     on any GPU it or a later driver knows, whatever its number */
} md_ptx_choice;

typedef enum {
    MD_SASS_NEWEST = 1,           /* SASS of the newest toolkit that targets the architecture */
    MD_SASS_LOWEST_DRIVER = 2     /* and of the toolkit whose SASS the oldest drivers load, when
                                     that is another one */
} md_sass_choice;

#define MD_MAX_OLD_PTX 8
#define MD_MAX_PTX_GROUPS 16
#define MD_MAX_PTX_GROUP_SMS 8

/* Architectures for which one toolkit's cicc writes the same PTX from the kernels (but for the
 * .target line and msda_config's architecture): their SASS is compiled from one PTX, the
 * lowest's (libmsda.json same_ptx, checked by kernels/check-same-ptx). */
typedef struct {
    unsigned major, minor;        /* the toolkit */
    unsigned sms[MD_MAX_PTX_GROUP_SMS];
    size_t n_sms;
} md_ptx_group;

typedef struct {
    char device_source[256];      /* in kernels/: "msda_kernels.cu" */
    char **nvcc_flags;            /* NULL-terminated, owned */
    unsigned ptxas_threads;       /* ptxas's threads for one SASS image, where nvcc has
                                     --split-compile; a constant: the SASS bytes depend on it */
    unsigned parts;               /* the device source is compiled this many times per image, */
    char part_define[MD_KNOB_NAME_MAX]; /* with this macro set to 0, 1, ... (kernels/msda_parts.h) */
    char **host_cflags;
    char **link_flags;
    char **libs;
    char version_define[MD_KNOB_NAME_MAX]; /* the host macro that carries the version */
    md_knob_rule knobs[MD_MAX_KNOBS];
    size_t n_knobs;
    unsigned ptx;                 /* md_ptx_choice bits */
    unsigned sass;                /* md_sass_choice bits; MD_SASS_NEWEST always */
    unsigned old_ptx_isa;         /* ISA (major * 10 + minor) of the PTX for old drivers; 0: none */
    unsigned old_ptx_sms[MD_MAX_OLD_PTX]; /* the architectures it is written for */
    size_t n_old_ptx_sms;
    char **fatbin_compress_flags; /* nvcc flags for every fatbin but the old drivers' PTX */
    md_ptx_group same_ptx[MD_MAX_PTX_GROUPS];
    size_t n_same_ptx;
} md_libmsda_recipe;

/* The architecture whose PTX toolkit MAJOR.MINOR compiles SM's SASS from: the lowest of SM's
 * same_ptx group for that toolkit, else SM itself. */
unsigned md_libmsda_ptx_arch(const md_libmsda_recipe *recipe, unsigned major, unsigned minor, unsigned sm);

/* Reads KERNELS_DIR/libmsda.json. MD_ERR_IO when it cannot be read, MD_ERR_FORMAT naming the
 * field when it is malformed (an unknown fact or PTX choice included). Free with
 * md_libmsda_recipe_free, also after a failure. */
md_status md_libmsda_recipe_load(const char *kernels_dir, md_libmsda_recipe *out, md_error *err);

void md_libmsda_recipe_free(md_libmsda_recipe *recipe);

/* The value of KNOB for ARCH, an entry of the architecture table or NULL when it has none. */
long md_knob_value(const md_knob_rule *knob, const md_arch *arch);

/* The rule named NAME, or NULL. */
const md_knob_rule *md_libmsda_knob(const md_libmsda_recipe *recipe, const char *name);

#endif
