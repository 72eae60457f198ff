/* What msda-doctor makes, named once: the distribution, where its library sits in the wheel,
 * the glibc floor its tag promises, and its version (from the top-level VERSION file, which
 * the Makefile passes as MSDA_DOCTOR_VERSION). Every other file asks here.
 * Scope: public: src/cli may include it. */
#ifndef MD_PRODUCT_H
#define MD_PRODUCT_H

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

#endif
