#include "up_to_date.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "recipes/product.h"

bool md_pack_key(const md_step_list *pack, const char *package_dir, char *const *package_files,
                 const char *version, long long source_date_epoch, const char *platform, char key[65])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    char line[64];
    snprintf(line, sizeof line, "%lld", source_date_epoch);
    ok = ok && EVP_DigestUpdate(ctx, MD_VERSION, strlen(MD_VERSION) + 1) &&
         EVP_DigestUpdate(ctx, platform, strlen(platform) + 1) && EVP_DigestUpdate(ctx, version, strlen(version) + 1) &&
         EVP_DigestUpdate(ctx, line, strlen(line) + 1);
    for (size_t i = 0; ok && i < pack->n; i++)
        for (size_t a = 0; ok && pack->steps[i].argv[a]; a++)
            ok = EVP_DigestUpdate(ctx, pack->steps[i].argv[a], strlen(pack->steps[i].argv[a]) + 1);
    for (size_t i = 0; ok && package_files && package_files[i]; i++) {
        char path[PATH_MAX * 2];
        snprintf(path, sizeof path, "%s/%s", package_dir, package_files[i]);
        ok = EVP_DigestUpdate(ctx, package_files[i], strlen(package_files[i]) + 1) && md_digest_file(ctx, path);
    }
    return md_digest_finish(ctx, ok, key);
}

static bool copy_string(json_t *doc, const char *name, char *out, size_t size)
{
    const char *v = json_string_value(json_object_get(doc, name));
    if (!v || strlen(v) >= size)
        return false;
    memcpy(out, v, strlen(v) + 1);
    return true;
}

bool md_pack_stamp_read(const char *path, md_pack_stamp *out)
{
    json_t *doc = json_load_file(path, 0, NULL);
    if (!doc)
        return false;
    json_t *major = json_object_get(doc, "glibc_major"), *minor = json_object_get(doc, "glibc_minor");
    bool ok = copy_string(doc, "key", out->key, sizeof out->key) &&
              copy_string(doc, "library", out->library, sizeof out->library) &&
              copy_string(doc, "wheel", out->wheel, sizeof out->wheel) &&
              copy_string(doc, "wheel_sha256", out->wheel_sha256, sizeof out->wheel_sha256) &&
              copy_string(doc, "platform_tag", out->platform_tag, sizeof out->platform_tag) &&
              json_is_integer(major) && json_is_integer(minor) && json_integer_value(major) >= 0 &&
              json_integer_value(minor) >= 0 && json_integer_value(major) < 100 && json_integer_value(minor) < 1000;
    if (ok) {
        out->glibc_major = (unsigned)json_integer_value(major);
        out->glibc_minor = (unsigned)json_integer_value(minor);
    }
    json_decref(doc);
    return ok;
}

md_status md_pack_stamp_write(const char *path, const md_pack_stamp *s, md_error *err)
{
    json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:s}", "key", s->key, "library", s->library, "wheel",
                            s->wheel, "wheel_sha256", s->wheel_sha256, "glibc_major", (int)s->glibc_major,
                            "glibc_minor", (int)s->glibc_minor, "platform_tag", s->platform_tag);
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    int rc = doc ? json_dump_file(doc, tmp, JSON_SORT_KEYS) : -1;
    json_decref(doc);
    if (rc != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return md_fail(err, MD_ERR_IO, "cannot write '%s': %s", path, rc != 0 ? "out of memory or space" : strerror(e));
    }
    return MD_OK;
}
