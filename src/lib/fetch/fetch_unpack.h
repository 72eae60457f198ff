/* The archives `fetch` downloads: unpacking one safely into a toolkit tree (their sha256:
 * sha256_file.h).
 * Scope: private to src/lib/fetch. */
#ifndef MD_FETCH_UNPACK_H
#define MD_FETCH_UNPACK_H

#include "base/status.h"

typedef enum {
    MD_UNPACK_REDIST, /* a tar archive (any compression) whose every member lies under TOP */
    MD_UNPACK_WHEEL   /* a wheel (zip): members outside TOP (dist-info, __init__.py) are passed over */
} md_unpack_kind;

/* Unpacks the archive of KIND at PATH into ROOT, an absolute path without symlinks or "..": the
 * contents of the folder TOP go to ROOT itself, as NVIDIA's redist archives and wheels are meant
 * to be merged. Refuses, with
 * MD_ERR_FORMAT naming the member, an absolute path, a ".." component, a member outside TOP, a
 * symlink or hard link leading outside ROOT and anything but files, folders and links; then
 * what was written so far stays in ROOT for the caller to remove. MD_ERR_IO when ROOT cannot be
 * written. */
md_status md_unpack_archive(const char *path, md_unpack_kind kind, const char *top, const char *root,
                            md_error *err);

#endif
