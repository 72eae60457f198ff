#include "product.h"

#include <stdio.h>
#include "build/wheel.h"

md_status md_product_wheel_name(const char *platform, char *out, size_t size, md_error *err)
{
    char tag[MD_WHEEL_TAG_MAX], dist[64];
    md_status st = md_wheel_platform_tag(platform, MD_GLIBC_FLOOR_MAJOR, MD_GLIBC_FLOOR_MINOR, tag, sizeof tag, err);
    if (st == MD_OK)
        st = md_wheel_normalize_dist(MD_DIST_NAME, dist, sizeof dist, err);
    if (st != MD_OK)
        return st;
    int n = snprintf(out, size, "%s-%s-%s-%s-%s.whl", dist, MD_VERSION, MD_PYTHON_TAG, MD_ABI_TAG, tag);
    if (n < 0 || (size_t)n >= size)
        return md_fail(err, MD_ERR_ARGUMENT, "no room for the wheel's name");
    return MD_OK;
}
