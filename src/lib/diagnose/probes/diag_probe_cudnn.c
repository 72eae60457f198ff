/* cuDNN and NCCL libraries for diagnose. The MSDA op needs neither, but builds of torch and of
 * models around it fail on a libcudnn.so.N without its unversioned development link, and on a
 * Jetson without NCCL. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "diag.h"

static const char *const lib_dirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
    "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda/targets/aarch64-linux/lib", "/usr/local/cuda/targets/sbsa-linux/lib",
};

static bool any_match(const char *pattern)
{
    glob_t g = { 0 };
    bool found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    return found;
}

void md_probe_cudnn(md_machine *m, md_check *c)
{
    c->id = "cudnn";
    c->name = "cuDNN";
    c->status = MD_CHECK_OK;
    for (size_t i = 0; i < sizeof lib_dirs / sizeof lib_dirs[0] && m->n_cudnn < MD_DIAG_MAX_DIRS; i++) {
        char dir[PATH_MAX], pattern[PATH_MAX + 32];
        md_rooted(m, lib_dirs[i], dir, sizeof dir);
        snprintf(pattern, sizeof pattern, "%s/libnccl.so*", dir);
        if (any_match(pattern))
            m->nccl_found = true;
        /* libcudnn.so.N: the runtime's soname link (libcudnn.so.8 -> libcudnn.so.8.6.0) */
        snprintf(pattern, sizeof pattern, "%s/libcudnn.so.[0-9]*", dir);
        glob_t g = { 0 };
        if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
            globfree(&g);
            continue;
        }
        const char *soname = NULL;
        for (size_t k = 0; k < g.gl_pathc; k++) {
            const char *base = strrchr(g.gl_pathv[k], '/') + 1;
            if (!strchr(base + strlen("libcudnn.so."), '.') && (!soname || strcmp(base, soname) > 0))
                soname = base;
        }
        if (!soname && g.gl_pathc)
            soname = strrchr(g.gl_pathv[0], '/') + 1;
        md_cudnn_dir *d = &m->cudnn[m->n_cudnn++];
        snprintf(d->dir, sizeof d->dir, "%s", dir);
        snprintf(d->soname, sizeof d->soname, "%s", soname);
        d->major = (unsigned)strtoul(soname + strlen("libcudnn.so."), NULL, 10);
        globfree(&g);
        char link[PATH_MAX + 16];
        struct stat st;
        snprintf(link, sizeof link, "%s/libcudnn.so", dir);
        d->unversioned_link = stat(link, &st) == 0; /* a dangling link is as good as none */
        if (d->unversioned_link) {
            md_check_add(c, MD_LINE_DETAIL, "%s/%s, with libcudnn.so", d->dir, d->soname);
        } else {
            md_check_add(c, MD_LINE_PROBLEM, "%s/%s has no unversioned libcudnn.so beside it: builds that link "
                         "-lcudnn or name libcudnn.so fail", d->dir, d->soname);
            md_check_add(c, MD_LINE_HINT, "sudo ln -s %s %s/libcudnn.so   (or install libcudnn%u-dev)", d->soname,
                         d->dir, d->major);
            md_check_raise(c, MD_CHECK_WARN);
        }
    }
    const char *headers[] = { "/usr/include/nccl.h", "/usr/local/cuda/include/nccl.h" };
    for (size_t i = 0; i < 2 && !m->nccl_found; i++) {
        char path[PATH_MAX];
        struct stat st;
        md_rooted(m, headers[i], path, sizeof path);
        m->nccl_found = stat(path, &st) == 0;
    }
    if (m->n_cudnn == 0) {
        c->status = MD_CHECK_SKIPPED;
        snprintf(c->summary, sizeof c->summary, "not found in the system library folders (the MSDA op does not need it)");
    } else {
        snprintf(c->summary, sizeof c->summary, "%s in %zu folder%s", m->cudnn[0].soname, m->n_cudnn,
                 m->n_cudnn == 1 ? "" : "s");
    }
    md_check_add(c, MD_LINE_DETAIL, "NCCL: %s", m->nccl_found ? "found" : "not found");
}
