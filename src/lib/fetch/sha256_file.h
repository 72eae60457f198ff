/* A file's sha256: the check of every archive fetch downloads, and of the wheels build keeps.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_SHA256_FILE_H
#define MD_SHA256_FILE_H

#include "base/status.h"

/* The sha256 of the file at PATH as 64 lowercase hex digits into HEX. MD_ERR_IO when unreadable;
 * ERR may be NULL. */
md_status md_sha256_file(const char *path, char hex[65], md_error *err);

#endif
