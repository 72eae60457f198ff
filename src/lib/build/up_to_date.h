/* Whether a build would write the very wheels the last one wrote, where it wrote them: the key
 * of everything that goes into a platform's library and wheel, and the stamp the last build left
 * for it in the work folder. A rebuild with nothing changed then links and packs nothing.
 * Scope: private to src/lib/build. */
#ifndef MD_UP_TO_DATE_H
#define MD_UP_TO_DATE_H

#include <limits.h>
#include <stdbool.h>
#include "base/status.h"
#include "build_steps.h"

typedef struct {
    char key[65];
    char library[PATH_MAX];
    char wheel[PATH_MAX];
    char wheel_sha256[65];
    unsigned glibc_major, glibc_minor;
    char platform_tag[128];
} md_pack_stamp;

/* The key of PLATFORM's library and wheel: the pack steps' commands (their inputs are named by
 * content in the cache), the package's files (PACKAGE_FILES under PACKAGE_DIR, their paths and
 * bytes), the version and the wheel members' time. False when a file cannot be read. */
bool md_pack_key(const md_step_list *pack, const char *package_dir, char *const *package_files,
                 const char *version, long long source_date_epoch, const char *platform, char key[65]);

/* The stamp at PATH; false when there is none or it cannot be read as one. */
bool md_pack_stamp_read(const char *path, md_pack_stamp *out);

/* Writes S to PATH (a temporary file renamed into place). */
md_status md_pack_stamp_write(const char *path, const md_pack_stamp *s, md_error *err);

#endif
