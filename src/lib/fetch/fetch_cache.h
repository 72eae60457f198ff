/* Where `fetch` keeps toolkits ($XDG_CACHE_HOME/msda-doctor by default), how one is laid out
 * there (cuda/MAJOR.MINOR/PLATFORM), and what is there: the one owner of that place, for fetch,
 * build and diagnose alike.
 * Scope: public: src/cli may include it. */
#ifndef MD_FETCH_CACHE_H
#define MD_FETCH_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"

typedef struct {
    char version[16];        /* "13.0", from the folder's name */
    char platform[24];       /* "linux-sbsa", from the folder's name */
    char path[PATH_MAX];     /* DIR/cuda/13.0/linux-sbsa */
    bool has_nvcc;           /* bin/nvcc is there and executable */
    int host_rank;           /* md_redist_host_rank on the machine asked about: -1 it does not run there */
} md_cached_toolkit;

/* The folders of one fetch of CUDA MAJOR.MINOR for PLATFORM into DIR. Each platform has its own
 * toolkit, download and temporary folder, so that fetches of two platforms never meet. */
typedef struct {
    char version_dir[PATH_MAX]; /* DIR/cuda/13.0: made by the fetch, removed when left empty */
    char toolkit[PATH_MAX];     /* DIR/cuda/13.0/linux-sbsa */
    char download[PATH_MAX];    /* DIR/cuda/13.0/.linux-sbsa.download: kept for a resume */
    char staging[PATH_MAX];     /* DIR/cuda/13.0/.linux-sbsa.tmp-XXXXXX: mkdtemp's template */
} md_fetch_paths;

/* $XDG_CACHE_HOME/msda-doctor (an absolute XDG_CACHE_HOME only, as the spec asks), else
 * $HOME/.cache/msda-doctor, into OUT; false when neither is set or the path does not fit. */
bool md_fetch_cache_dir(char *out, size_t size);

/* The folders of CUDA MAJOR.MINOR for PLATFORM in DIR into *OUT. MD_ERR_ARGUMENT when a path
 * does not fit. */
md_status md_fetch_cache_paths(const char *dir, unsigned major, unsigned minor, const char *platform,
                               md_fetch_paths *out, md_error *err);

/* The toolkits in DIR (DIR/cuda/MAJOR.MINOR/PLATFORM, for the platforms of recipes/redist.json,
 * or for PLATFORM alone unless it is NULL), ranked for a machine of `uname -m` MACHINE (NULL:
 * this one's), into *OUT (malloc'd, caller frees; NULL with 0 when there are none or DIR is
 * missing): by version ascending, and within a version those that run on MACHINE first, the
 * preferred one first. MD_ERR_ARGUMENT for an unknown PLATFORM; MD_ERR_IO when DIR is there but
 * unreadable; MD_ERR_INTERNAL when the recipe is broken. */
md_status md_fetch_cache_list(const char *dir, const char *platform, const char *machine, md_cached_toolkit **out,
                              size_t *count, md_error *err);

/* Removes CUDA VERSION ("13.0" or "13.0.2") for PLATFORM from DIR, or for every platform when
 * PLATFORM is NULL, with what an interrupted fetch of it left beside it (its download and
 * temporary folders), and the version's folder once empty. What was removed goes into *REMOVED
 * (malloc'd, caller frees; HAS_NVCC false and HOST_RANK -1 there). MD_ERR_ARGUMENT for a malformed version, an
 * unknown platform, or when there is no such toolkit; MD_ERR_IO when a toolkit stays. */
md_status md_fetch_cache_remove(const char *dir, const char *version, const char *platform,
                                md_cached_toolkit **removed, size_t *count, md_error *err);

/* Removes the tree at PATH, not following symlinks; what cannot be removed stays. */
void md_remove_tree(const char *path);

#endif
