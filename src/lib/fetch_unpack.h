/* The archives `fetch` downloads: their sha256, and unpacking one safely into a toolkit tree. */
#ifndef MD_FETCH_UNPACK_H
#define MD_FETCH_UNPACK_H

#include "status.h"

/* The sha256 of the file at PATH as 64 lowercase hex digits into HEX. MD_ERR_IO when unreadable. */
md_status md_sha256_file(const char *path, char hex[65], md_error *err);

/* Unpacks the tar archive (any compression libarchive reads) at PATH into ROOT, an absolute
 * path without symlinks or "..": each member must lie under the top folder TOP, whose contents
 * go to ROOT itself, as NVIDIA's redist archives are meant to be merged. Refuses, with
 * MD_ERR_FORMAT naming the member, an absolute path, a ".." component, a member outside TOP, a
 * symlink or hard link leading outside ROOT and anything but files, folders and links; then
 * what was written so far stays in ROOT for the caller to remove. MD_ERR_IO when ROOT cannot be
 * written. */
md_status md_unpack_archive(const char *path, const char *top, const char *root, md_error *err);

#endif
