/* Where `fetch` keeps toolkits by default ($XDG_CACHE_HOME/msda-doctor/cuda-MAJOR.MINOR), and
 * what is there: the one owner of that place, for fetch, build and diagnose alike. */
#ifndef MD_FETCH_CACHE_H
#define MD_FETCH_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include "status.h"

typedef struct {
    char version[16];        /* "13.0", from the folder's name */
    char path[PATH_MAX];     /* DIR/cuda-13.0 */
    bool has_nvcc;           /* bin/nvcc is there and executable */
} md_cached_toolkit;

/* $XDG_CACHE_HOME/msda-doctor (an absolute XDG_CACHE_HOME only, as the spec asks), else
 * $HOME/.cache/msda-doctor, into OUT; false when neither is set or the path does not fit. */
bool md_fetch_cache_dir(char *out, size_t size);

/* The cuda-MAJOR.MINOR folders in DIR, by version ascending, into *OUT (malloc'd, caller frees;
 * NULL with 0 when there are none or DIR is missing). MD_ERR_IO when DIR is there but unreadable. */
md_status md_fetch_cache_list(const char *dir, md_cached_toolkit **out, size_t *count, md_error *err);

/* Removes DIR/cuda-MAJOR.MINOR for VERSION ("13.0" or "13.0.2"), with what an interrupted fetch
 * of it left beside it (its download and temporary folders); the removed folder into REMOVED.
 * MD_ERR_ARGUMENT for a malformed version or when there is no such folder. */
md_status md_fetch_cache_remove(const char *dir, const char *version, char *removed, size_t size, md_error *err);

/* Removes the tree at PATH, not following symlinks; what cannot be removed stays. */
void md_remove_tree(const char *path);

#endif
