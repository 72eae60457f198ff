/* Packing a platform's libmsda.so: the glibc pins its host objects are compiled with, the
 * manylinux check of the linked library, and the wheel with the Python package.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_PACKAGE_H
#define MD_PACKAGE_H

#include <limits.h>
#include <time.h>
#include <stdbool.h>
#include "base/status.h"
#include "base/strv.h"

/* Writes PATH: a header, given to every host compilation with -include, that binds the
 * functions glibc 2.34 moved into libc to PLATFORM's base version (recipes/platforms.json).
 * Rewriting the same text changes nothing the cache keys see. */
md_status md_package_write_glibc_pins(const char *platform, const char *path, md_error *err);

/* Checks LIBRARY against product.h's glibc floor and the libraries manylinux allows, and
 * writes the platform tag it earns into TAG. MD_ERR_BUILD naming the symbols or library that
 * would make the tag lie. */
md_status md_package_check_manylinux(const char *library, const char *platform, unsigned *glibc_major,
                                     unsigned *glibc_minor, char *tag, size_t tag_size, md_error *err);

/* The file name of the wheel `build` writes for PLATFORM ("x86_64", "aarch64") into OUT:
 * "msda-0.1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl".
 * MD_ERR_ARGUMENT for an unknown platform or an OUT too small. */
md_status md_package_wheel_name(const char *platform, char *out, size_t size, md_error *err);

typedef struct {
    const char *package_dir;   /* the Python package sources: wheels/ */
    const char *library;       /* the linked libmsda.so */
    const char *platform_tag;  /* from md_package_check_manylinux */
    const char *version;
    const char *out_dir;
    time_t source_date_epoch;  /* 0: the writer's fixed default */
} md_package_spec;

/* The package's files that the wheel carries, relative to PACKAGE_DIR and sorted, into *OUT (a
 * NULL-terminated list, freed with strv_free). False when none or when the folder cannot be read. */
bool md_package_files(const char *package_dir, strv *out);

/* Writes the wheel: the package's modules, the library as MD_LIBRARY_MEMBER and the version
 * as MD_VERSION_MEMBER. The path written goes to WRITTEN. */
md_status md_package_write_wheel(const md_package_spec *spec, char *written, size_t size, md_error *err);

#endif
