/* NVIDIA's CUDA redistributables (recipes/redist.json): where the manifests are, which redist
 * platform a host fetches, and which components compiling device code takes. Its one reader.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_REDIST_TABLE_H
#define MD_REDIST_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

#define MD_REDIST_MAX_COMPONENTS 16
#define MD_REDIST_MAX_PLATFORMS 8

typedef struct {
    char name[48];   /* manifest key: "cuda_nvcc" */
    bool required;   /* the fetch fails when the manifest lacks it for the platform */
} md_redist_component;

#define MD_WHEEL_MAX_PACKAGES 8
#define MD_WHEEL_MAX_MAJORS 8

typedef struct {
    char name[48];            /* the project on the index: "nvidia-cuda-nvcc" */
    char same_version_as[48]; /* take that package's full version where the index has it; "" none */
} md_wheel_package;

/* One CUDA major version as NVIDIA's compiler wheels: the packages that make a toolkit, or why
 * its wheels cannot (REFUSED non-empty, no packages). */
typedef struct {
    unsigned major;
    char root[48];            /* the wheels' folder that becomes the toolkit folder: "nvidia/cu13" */
    md_wheel_package packages[MD_WHEEL_MAX_PACKAGES];
    size_t n_packages;
    char refused[256];
} md_wheel_major;

typedef struct {
    char base_url[256];                       /* no trailing '/' */
    char platforms[MD_REDIST_MAX_PLATFORMS][24]; /* "linux-x86_64", ... */
    size_t n_platforms;
    char host_machine[MD_REDIST_MAX_PLATFORMS][24]; /* `uname -m` ... */
    /* ... and the platforms whose toolkits run there, preferred first; the first is fetched */
    char host_platforms[MD_REDIST_MAX_PLATFORMS][MD_REDIST_MAX_PLATFORMS][24];
    size_t n_host_platforms[MD_REDIST_MAX_PLATFORMS];
    size_t n_hosts;
    md_redist_component components[MD_REDIST_MAX_COMPONENTS];
    size_t n_components;
    char index_url[256];                      /* the default package index, no trailing '/' */
    char wheel_platform[MD_REDIST_MAX_PLATFORMS][24]; /* redist platform ... */
    char wheel_machine[MD_REDIST_MAX_PLATFORMS][16];  /* ... and its manylinux machine: "x86_64" */
    size_t n_wheel_platforms;
    md_wheel_major wheel_majors[MD_WHEEL_MAX_MAJORS];
    size_t n_wheel_majors;                    /* 0: the recipe names no wheel source */
} md_redist_table;

/* The embedded table, loaded on first use (not thread-safe then); NULL with MD_ERR_INTERNAL in
 * ERR when the recipe is malformed. The table lives until md_redist_table_free. */
const md_redist_table *md_redist_table_get(md_error *err);

/* Reads a document shaped like redist.json into *OUT (tests feed it broken ones). */
md_status md_redist_table_load_json(json_t *doc, md_redist_table *out, md_error *err);

/* Frees the loaded table (for leak-checked tests). */
void md_redist_table_free(void);

/* True when NAME is one of T's platforms. */
bool md_redist_platform_known(const md_redist_table *t, const char *name);

/* T's platforms as a phrase for messages, "linux-x86_64, linux-sbsa or linux-aarch64", into OUT. */
void md_redist_platform_names(const md_redist_table *t, char *out, size_t size);

/* The platform a machine of `uname -m` MACHINE fetches, or NULL when the table has none. */
const char *md_redist_host_platform(const md_redist_table *t, const char *machine);

/* Where PLATFORM's toolkits rank on a machine of `uname -m` MACHINE: 0 for the one it fetches,
 * 1 and on for others that run there, less preferred (linux-aarch64 after linux-sbsa); -1 when
 * they do not run there. */
int md_redist_host_rank(const md_redist_table *t, const char *machine, const char *platform);

/* The wheel recipe of CUDA MAJOR, or NULL when the table has none. */
const md_wheel_major *md_redist_wheel_major(const md_redist_table *t, unsigned major);

/* The manylinux machine ("x86_64") of the wheels for redist PLATFORM, or NULL. */
const char *md_redist_wheel_machine(const md_redist_table *t, const char *platform);

#endif
