/* What msda-doctor makes, named once: the distribution, where its library sits in the wheel,
 * the glibc floor its tag promises, and its version (from the top-level VERSION file, which
 * the Makefile passes as MSDA_DOCTOR_VERSION). Every other file asks here. */
#ifndef MD_PRODUCT_H
#define MD_PRODUCT_H

#include <stddef.h>
#include "base/status.h"

#ifndef MSDA_DOCTOR_VERSION
#error "MSDA_DOCTOR_VERSION comes from the VERSION file through the Makefile"
#endif
#define MD_VERSION MSDA_DOCTOR_VERSION

#define MD_DIST_NAME "msda"                 /* the distribution and its import package */
#define MD_LIBRARY_NAME "libmsda.so"        /* also its soname */
#define MD_LIBRARY_MEMBER MD_DIST_NAME "/" MD_LIBRARY_NAME
#define MD_VERSION_MEMBER MD_DIST_NAME "/_version.py"
#define MD_PYTHON_TAG "py3"                 /* any Python 3: the library is loaded with ctypes */
#define MD_ABI_TAG "none"
#define MD_REQUIRES_PYTHON ">=3.8"
#define MD_SUMMARY "Multi-Scale Deformable Attention (Deformable-DETR's MSDeformAttn) for any torch and any Python"

/* manylinux_2_17: the highest glibc symbol version the library may need. */
#define MD_GLIBC_FLOOR_MAJOR 2u
#define MD_GLIBC_FLOOR_MINOR 17u

/* The file name of the wheel `build` writes for PLATFORM ("x86_64", "aarch64") into OUT:
 * "msda-0.1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl".
 * MD_ERR_ARGUMENT for an unknown platform or an OUT too small. */
md_status md_product_wheel_name(const char *platform, char *out, size_t size, md_error *err);

#endif
