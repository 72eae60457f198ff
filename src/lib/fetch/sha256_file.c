#include "sha256_file.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

md_status md_sha256_file(const char *path, char hex[65], md_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return md_fail(err, MD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    md_status st = MD_OK;
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        st = md_fail(err, MD_ERR_INTERNAL, "cannot start a sha256 digest");
        goto end;
    }
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        EVP_DigestUpdate(ctx, buf, n);
    if (ferror(f)) {
        st = md_fail(err, MD_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        goto end;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    if (!EVP_DigestFinal_ex(ctx, md, &len) || len != 32) {
        st = md_fail(err, MD_ERR_INTERNAL, "cannot finish a sha256 digest");
        goto end;
    }
    for (unsigned i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
end:
    EVP_MD_CTX_free(ctx);
    fclose(f);
    return st;
}
