/* Packing a platform's libmsda.so: the glibc pins its host objects are compiled with, the
 * manylinux check of the linked library, and the wheel with the Python package. */
#ifndef MD_PACKAGE_H
#define MD_PACKAGE_H

#include <limits.h>
#include <time.h>
#include "base/status.h"

/* Writes PATH: a header, given to every host compilation with -include, that binds the
 * functions glibc 2.34 moved into libc to PLATFORM's base version (recipes/platforms.json).
 * Rewriting the same text changes nothing the cache keys see. */
md_status md_package_write_glibc_pins(const char *platform, const char *path, md_error *err);

/* Checks LIBRARY against product.h's glibc floor and the libraries manylinux allows, and
 * writes the platform tag it earns into TAG. MD_ERR_BUILD naming the symbols or library that
 * would make the tag lie. */
md_status md_package_check_manylinux(const char *library, const char *platform, unsigned *glibc_major,
                                     unsigned *glibc_minor, char *tag, size_t tag_size, md_error *err);

typedef struct {
    const char *package_dir;   /* the Python package sources: wheels/ */
    const char *library;       /* the linked libmsda.so */
    const char *platform_tag;  /* from md_package_check_manylinux */
    const char *version;
    const char *out_dir;
    time_t source_date_epoch;  /* 0: the writer's fixed default */
} md_package_spec;

/* Writes the wheel: the package's modules, the library as MD_LIBRARY_MEMBER and the version
 * as MD_VERSION_MEMBER. The path written goes to WRITTEN. */
md_status md_package_write_wheel(const md_package_spec *spec, char *written, size_t size, md_error *err);

#endif
