#include "wheel_record.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/text_buf.h"
#include "zip_members.h"

/* RECORD of a wheel we are asked to verify is read into memory; no real one comes near this. */
#define MAX_RECORD_SIZE ((size_t)64 << 20)

/* sha256 as RECORD writes it: urlsafe base64 without padding. */
void md_wheel_record_digest(const unsigned char digest[32], char out[MD_WHEEL_DIGEST_SIZE])
{
    int n = EVP_EncodeBlock((unsigned char *)out, digest, 32);
    while (n > 0 && out[n - 1] == '=')
        n--;
    out[n] = '\0';
    for (char *p = out; *p; p++) {
        if (*p == '+')
            *p = '-';
        else if (*p == '/')
            *p = '_';
    }
}

typedef struct {
    char *name;
    char digest[MD_WHEEL_DIGEST_SIZE];
    uint64_t size;
    bool listed;
} archived_file;

static int compare_archived(const void *a, const void *b)
{
    return strcmp(((const archived_file *)a)->name, ((const archived_file *)b)->name);
}

/* "X.dist-info/RECORD" at the top of the archive. */
static bool is_record_path(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash || strcmp(slash, "/RECORD") != 0)
        return false;
    size_t dir_len = (size_t)(slash - name);
    return dir_len > 10 && strncmp(slash - 10, ".dist-info", 10) == 0;
}

/* Splits one CSV field off *CURSOR in place (Python's csv: "..." with "" for a quote).
 * Returns the field, or NULL when a quoted field is not closed. */
static char *next_csv_field(char **cursor, bool *last)
{
    char *p = *cursor;
    char *field = p;
    if (*p == '"') {
        char *out = p;
        p++;
        for (;;) {
            if (*p == '\0')
                return NULL;
            if (*p == '"') {
                if (p[1] == '"') {
                    *out++ = '"';
                    p += 2;
                    continue;
                }
                p++;
                break;
            }
            *out++ = *p++;
        }
        if (*p != ',' && *p != '\0')
            return NULL;
        *last = *p == '\0';
        *out = '\0';
        *cursor = *last ? p : p + 1;
        return field;
    }
    p += strcspn(p, ",");
    *last = *p == '\0';
    *p = '\0';
    *cursor = *last ? p : p + 1;
    return field;
}

static md_status check_record_rows(char *record, const char *record_name, archived_file *files,
                                   size_t n_files, md_error *err)
{
    unsigned line_no = 0;
    char *line = record;
    while (*line) {
        line_no++;
        char *end = line + strcspn(line, "\n");
        char *next = *end ? end + 1 : end;
        *end = '\0';
        if (end > line && end[-1] == '\r')
            end[-1] = '\0';
        if (*line == '\0') {
            line = next;
            continue;
        }
        bool last = false;
        char *cursor = line;
        char *name = next_csv_field(&cursor, &last);
        char *hash = name && !last ? next_csv_field(&cursor, &last) : NULL;
        char *size = hash && !last ? next_csv_field(&cursor, &last) : NULL;
        if (!size || !last)
            return md_fail(err, MD_ERR_FORMAT, "RECORD line %u is not three CSV fields", line_no);
        archived_file key = { .name = name };
        archived_file *f = bsearch(&key, files, n_files, sizeof *files, compare_archived);
        if (!f)
            return md_fail(err, MD_ERR_FORMAT, "RECORD lists '%s', which the wheel does not contain", name);
        if (f->listed)
            return md_fail(err, MD_ERR_FORMAT, "RECORD lists '%s' twice", name);
        f->listed = true;
        if (strcmp(name, record_name) == 0) {
            if (*hash || *size)
                return md_fail(err, MD_ERR_FORMAT, "RECORD's own row '%s' must have no hash and no size",
                               name);
        } else {
            if (strncmp(hash, "sha256=", 7) != 0)
                return md_fail(err, MD_ERR_FORMAT, "RECORD row for '%s' has no sha256 hash", name);
            if (strcmp(hash + 7, f->digest) != 0)
                return md_fail(err, MD_ERR_FORMAT, "'%s' has sha256 %s but RECORD says %s", name, f->digest,
                               hash + 7);
            char *size_end = NULL;
            errno = 0;
            unsigned long long recorded = strtoull(size, &size_end, 10);
            if (!*size || !isdigit((unsigned char)size[0]) || *size_end || errno)
                return md_fail(err, MD_ERR_FORMAT, "RECORD row for '%s' has an invalid size '%s'", name,
                               size);
            if (recorded != f->size)
                return md_fail(err, MD_ERR_FORMAT, "'%s' has %llu bytes but RECORD says %llu", name,
                               (unsigned long long)f->size, recorded);
        }
        line = next;
    }
    for (size_t i = 0; i < n_files; i++)
        if (!files[i].listed)
            return md_fail(err, MD_ERR_FORMAT, "'%s' is not listed in RECORD", files[i].name);
    return MD_OK;
}

typedef struct {
    EVP_MD_CTX *sha;
    const char *name;
    bool keep;
    md_text_buf *kept;
} hashing;

static md_status hash_block(const void *data, size_t len, void *ctx, md_error *err)
{
    hashing *h = ctx;
    if (!EVP_DigestUpdate(h->sha, data, len))
        return md_fail(err, MD_ERR_INTERNAL, "sha256 failed in libcrypto");
    if (h->keep) {
        if (h->kept->len + len > MAX_RECORD_SIZE)
            return md_fail(err, MD_ERR_FORMAT, "'%s' is larger than %zu bytes", h->name, MAX_RECORD_SIZE);
        md_buf_append(h->kept, data, len);
        if (h->kept->failed)
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    return MD_OK;
}

/* Hashes the current member of ZIP; keeps its bytes in *KEPT when KEEP (for RECORD). */
static md_status hash_member(md_zip *zip, const char *name, archived_file *f, bool keep, md_text_buf *kept,
                             md_error *err)
{
    hashing h = { .sha = EVP_MD_CTX_new(), .name = name, .keep = keep, .kept = kept };
    if (!h.sha || !EVP_DigestInit_ex(h.sha, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(h.sha);
        return md_fail(err, MD_ERR_INTERNAL, "sha256 failed in libcrypto");
    }
    md_status st = md_zip_read(zip, hash_block, &h, &f->size, err);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    if (st == MD_OK && (!EVP_DigestFinal_ex(h.sha, digest, &digest_len) || digest_len != 32))
        st = md_fail(err, MD_ERR_INTERNAL, "sha256 failed in libcrypto");
    if (st == MD_OK)
        md_wheel_record_digest(digest, f->digest);
    EVP_MD_CTX_free(h.sha);
    return st;
}

md_status md_wheel_verify_record(const char *path, md_error *err)
{
    md_zip *zip;
    md_status st = md_zip_open(path, &zip, err);
    if (st != MD_OK)
        return st;
    archived_file *files = NULL;
    size_t n_files = 0, cap = 0;
    md_text_buf record = { 0 };
    char *record_name = NULL;
    md_zip_member m;
    bool end = false;
    while ((st = md_zip_next(zip, &m, &end, err)) == MD_OK && !end) {
        if (m.type == MD_ZIP_DIRECTORY)
            continue; /* directories are not listed in RECORD */
        if (n_files == cap) {
            size_t grown_cap = cap ? cap * 2 : 32;
            archived_file *grown = realloc(files, grown_cap * sizeof *grown);
            if (!grown) {
                st = md_fail(err, MD_ERR_NOMEM, "out of memory");
                goto end;
            }
            files = grown;
            cap = grown_cap;
        }
        archived_file *f = &files[n_files];
        memset(f, 0, sizeof *f);
        if (!(f->name = strdup(m.name))) {
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
            goto end;
        }
        n_files++;
        bool is_record = is_record_path(f->name);
        if (is_record && record_name) {
            st = md_fail(err, MD_ERR_FORMAT, "'%s' has two RECORD files: '%s' and '%s'", path, record_name,
                         f->name);
            goto end;
        }
        if (is_record)
            record_name = f->name;
        if ((st = hash_member(zip, f->name, f, is_record, &record, err)) != MD_OK)
            goto end;
    }
    if (st != MD_OK)
        goto end;
    if (!record_name) {
        st = md_fail(err, MD_ERR_FORMAT, "'%s' has no .dist-info/RECORD", path);
        goto end;
    }
    qsort(files, n_files, sizeof *files, compare_archived);
    for (size_t i = 1; i < n_files; i++)
        if (strcmp(files[i - 1].name, files[i].name) == 0) {
            st = md_fail(err, MD_ERR_FORMAT, "'%s' holds '%s' twice", path, files[i].name);
            goto end;
        }
    md_buf_append(&record, "", 0); /* an empty RECORD still gets a terminated buffer */
    if (record.failed) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    if (memchr(record.text, '\0', record.len)) {
        st = md_fail(err, MD_ERR_FORMAT, "'%s' has a NUL byte", record_name);
        goto end;
    }
    /* record_name is the string itself, which the sort of files[] did not move. */
    st = check_record_rows(record.text, record_name, files, n_files, err);
end:
    md_zip_close(zip);
    for (size_t i = 0; i < n_files; i++)
        free(files[i].name);
    free(files);
    free(record.text);
    return st;
}
