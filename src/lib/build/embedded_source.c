/* Unpacking the sources embedded at compile time (embedded_source.h). */
#include "build/embedded_source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/write_all.h"
#include "build/build_steps.h"
#include "fetch/fetch_cache.h"

/* Marks a folder whose every file was written; a folder without it is not used. */
#define COMPLETE_MARK ".complete"

bool md_embedded_source_name(char *out, size_t size)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (const struct md_embedded_file *f = md_embedded_sources; ok && f->path; f++) {
        uint64_t size64 = f->size;
        ok = EVP_DigestUpdate(ctx, f->path, strlen(f->path) + 1) &&
             EVP_DigestUpdate(ctx, f->executable ? "x" : "-", 1) && EVP_DigestUpdate(ctx, &size64, sizeof size64) &&
             EVP_DigestUpdate(ctx, f->data, f->size);
    }
    unsigned char md[32];
    unsigned len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    int n = ok ? snprintf(out, size, "source-") : -1;
    for (unsigned i = 0; ok && i < 8; i++)
        n += snprintf(out + n, size > (size_t)n ? size - (size_t)n : 0, "%02x", md[i]);
    return ok && n > 0 && (size_t)n < size;
}

/* Writes one file under ROOT, creating its folders. */
static md_status write_one(const char *root, const struct md_embedded_file *f, md_error *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", root, f->path) >= (int)sizeof path)
        return md_fail(err, MD_ERR_IO, "path too long under '%s'", root);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    md_status st = md_ensure_dir(path, err);
    *slash = '/';
    if (st != MD_OK)
        return st;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, f->executable ? 0755 : 0644);
    if (fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    bool ok = md_write_all(fd, f->data, f->size) == 0;
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    return ok ? MD_OK : md_fail(err, MD_ERR_IO, "cannot write '%s': %s", path, strerror(saved));
}

static md_status write_tree(const char *root, md_error *err)
{
    md_status st = MD_OK;
    for (const struct md_embedded_file *f = md_embedded_sources; st == MD_OK && f->path; f++)
        st = write_one(root, f, err);
    if (st == MD_OK) {
        struct md_embedded_file mark = { .path = COMPLETE_MARK, .data = (const unsigned char *)"", .size = 0 };
        st = write_one(root, &mark, err);
    }
    return st;
}

static bool is_complete(const char *dir)
{
    char mark[PATH_MAX];
    return snprintf(mark, sizeof mark, "%s/%s", dir, COMPLETE_MARK) < (int)sizeof mark && access(mark, F_OK) == 0;
}

md_status md_embedded_source_unpack(const char *parent, char *dir, size_t size, md_error *err)
{
    char name[MD_EMBEDDED_SOURCE_DIR_MAX];
    if (!md_embedded_source_name(name, sizeof name))
        return md_fail(err, MD_ERR_NOMEM, "cannot hash the embedded sources");
    if (snprintf(dir, size, "%s/%s", parent, name) >= (int)size)
        return md_fail(err, MD_ERR_IO, "path too long: '%s'", parent);
    if (is_complete(dir))
        return MD_OK;
    md_status st = md_ensure_dir(parent, err);
    if (st != MD_OK)
        return st;
    char staging[PATH_MAX];
    if (snprintf(staging, sizeof staging, "%s/.%s-XXXXXX", parent, name) >= (int)sizeof staging)
        return md_fail(err, MD_ERR_IO, "path too long: '%s'", parent);
    if (!mkdtemp(staging))
        return md_fail(err, MD_ERR_IO, "cannot create a folder in '%s': %s", parent, strerror(errno));
    chmod(staging, 0755); /* mkdtemp's 0700 would keep the sources from others sharing the cache */
    st = write_tree(staging, err);
    if (st == MD_OK && rename(staging, dir) != 0) {
        /* Another build unpacked the same sources first (the folder exists and is not empty):
         * theirs is as good as ours. Anything else (a half-written folder left by an older
         * interrupted run has no mark) is moved aside and ours put in its place. */
        if (!is_complete(dir)) {
            char aside[PATH_MAX];
            snprintf(aside, sizeof aside, "%s.stale-%ld", staging, (long)getpid());
            if (rename(dir, aside) == 0)
                md_remove_tree(aside);
            if (rename(staging, dir) != 0 && !is_complete(dir))
                st = md_fail(err, MD_ERR_IO, "cannot rename '%s' to '%s': %s", staging, dir, strerror(errno));
        }
    }
    md_remove_tree(staging); /* nothing there after a successful rename */
    return st;
}
