#include "wheel.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "recipes/platform.h"
#include "recipes/product.h"
#include "base/write_all.h"
#include "base/text_buf.h"
#include "binary/wheel_record.h"


/* DOS timestamps end in 2107 and the zip "UT" field has 32 bits: later dates are refused, not wrapped. */
#define MAX_EPOCH ((time_t)4102444800)

/* ---- small text helpers --------------------------------------------------------------------- */

static bool is_alnum_ascii(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_name_separator(char c)
{
    return c == '-' || c == '_' || c == '.';
}

/* A single-line METADATA value: a newline would start a forged header. */
static bool is_one_line(const char *s)
{
    return strpbrk(s, "\r\n") == NULL;
}

/* ---- names and tags ------------------------------------------------------------------------- */

md_status md_wheel_normalize_dist(const char *name, char *out, size_t size, md_error *err)
{
    if (!name || !*name)
        return md_fail(err, MD_ERR_ARGUMENT, "empty distribution name");
    size_t n = 0;
    for (const char *p = name; *p;) {
        char c = *p;
        if (is_name_separator(c)) {
            while (is_name_separator(*p))
                p++;
            c = '_';
        } else {
            p++;
        }
        if (n + 1 >= size)
            return md_fail(err, MD_ERR_ARGUMENT, "distribution name '%s' is too long", name);
        out[n++] = c;
    }
    out[n] = '\0';
    return MD_OK;
}

/* PEP 508 names: letters, digits and "-_.", starting and ending with a letter or digit. */
static bool valid_dist(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || !is_alnum_ascii(name[0]) || !is_alnum_ascii(name[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum_ascii(name[i]) && !is_name_separator(name[i]))
            return false;
    return true;
}

/* Normalised PEP 440 versions use letters, digits and ".+!"; "-" would split the file name. */
static bool valid_version(const char *v)
{
    if (!*v)
        return false;
    for (const char *p = v; *p; p++)
        if (!is_alnum_ascii(*p) && *p != '.' && *p != '+' && *p != '!' && *p != '_')
            return false;
    return true;
}

/* A tag set: '.'-separated non-empty members of letters, digits and '_'. */
static bool valid_tag_set(const char *tag)
{
    if (!*tag || *tag == '.')
        return false;
    for (const char *p = tag; *p; p++) {
        if (*p == '.') {
            if (p[1] == '.' || p[1] == '\0')
                return false;
        } else if (!is_alnum_ascii(*p) && *p != '_') {
            return false;
        }
    }
    return true;
}

md_status md_wheel_file_name(const char *dist, const char *version, const char *python_tag, const char *abi_tag,
                             const char *platform_tag, char *out, size_t size, md_error *err)
{
    char normal[256];
    md_status st = md_wheel_normalize_dist(dist, normal, sizeof normal, err);
    if (st != MD_OK)
        return st;
    int n = snprintf(out, size, "%s-%s-%s-%s-%s.whl", normal, version, python_tag, abi_tag, platform_tag);
    if (n < 0 || (size_t)n >= size)
        return md_fail(err, MD_ERR_ARGUMENT, "no room for the wheel's name");
    return MD_OK;
}

md_status md_wheel_platform_tag(const char *arch, unsigned glibc_major, unsigned glibc_minor,
                                char *tag, size_t size, md_error *err)
{
    if (!arch || !md_platform_find(arch))
        return md_fail(err, MD_ERR_ARGUMENT, "no manylinux tag for CPU architecture '%s'",
                       arch ? arch : "(null)");
    /* 0.0 is what the ELF reader reports for code that needs no versioned glibc symbol. */
    if (glibc_major == 0 && glibc_minor == 0)
        glibc_major = 2;
    if (glibc_major != 2)
        return md_fail(err, MD_ERR_ARGUMENT, "no manylinux tag for glibc %u.%u", glibc_major, glibc_minor);
    int n;
    /* manylinux_2_17 is the oldest policy pip still installs on every supported system, and
     * manylinux2014 is its PEP 599 name, which older pips (before 20.3) understand. */
    if (glibc_minor <= 17)
        n = snprintf(tag, size, "manylinux_2_17_%s.manylinux2014_%s", arch, arch);
    else
        n = snprintf(tag, size, "manylinux_2_%u_%s", glibc_minor, arch);
    if (n < 0 || (size_t)n >= size)
        return md_fail(err, MD_ERR_ARGUMENT, "platform tag does not fit in %zu bytes", size);
    return MD_OK;
}

/* Member paths go into RECORD unquoted and into zip headers as ASCII, so keep them plain. */
static md_status check_member_path(const char *path, md_error *err)
{
    if (!path || !*path)
        return md_fail(err, MD_ERR_ARGUMENT, "empty member path");
    if (path[0] == '/')
        return md_fail(err, MD_ERR_ARGUMENT, "member path '%s' is absolute", path);
    for (const char *p = path; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20 || c > 0x7e || c == ',' || c == '"' || c == '\\')
            return md_fail(err, MD_ERR_ARGUMENT, "member path '%s' has a character wheels cannot carry here",
                           path);
    }
    const char *comp = path;
    for (;;) {
        size_t len = strcspn(comp, "/");
        if (len == 0 || (len == 1 && comp[0] == '.') || (len == 2 && comp[0] == '.' && comp[1] == '.'))
            return md_fail(err, MD_ERR_ARGUMENT, "member path '%s' has an empty, '.' or '..' component",
                           path);
        if (comp[len] == '\0')
            break;
        comp += len + 1;
    }
    return MD_OK;
}

/* ---- hashing -------------------------------------------------------------------------------- */

static md_status sha256_record(const void *data, size_t size, char out[MD_WHEEL_DIGEST_SIZE], md_error *err)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    if (!EVP_Digest(data, size, digest, &digest_len, EVP_sha256(), NULL) || digest_len != 32)
        return md_fail(err, MD_ERR_INTERNAL, "sha256 failed in libcrypto");
    md_wheel_record_digest(digest, out);
    return MD_OK;
}

/* ---- the writer ----------------------------------------------------------------------------- */

typedef struct {
    char *path;            /* owned */
    const md_wheel_file *file; /* the caller's, or NULL for a generated member */
    const void *data;      /* generated members: points into a md_text_buf */
    size_t size;
    bool executable;
    bool dist_info;        /* sorted after the payload */
} member;

static int compare_members(const void *a, const void *b)
{
    const member *x = a, *y = b;
    if (x->dist_info != y->dist_info)
        return x->dist_info ? 1 : -1;
    return strcmp(x->path, y->path);
}

/* Reads the whole file PATH into *DATA (caller frees; NULL for an empty file). */
static md_status read_source(const char *path, void **data, size_t *size, md_error *err)
{
    *data = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    md_status st = MD_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = md_fail(err, MD_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
        goto end;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = md_fail(err, MD_ERR_IO, "'%s' is not a regular file", path);
        goto end;
    }
    size_t want = (size_t)sb.st_size;
    unsigned char *buf = malloc(want ? want : 1);
    if (!buf) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory reading '%s'", path);
        goto end;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, buf + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            st = md_fail(err, MD_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
            free(buf);
            goto end;
        }
        if (r == 0) {
            st = md_fail(err, MD_ERR_IO, "'%s' shrank while being read", path);
            free(buf);
            goto end;
        }
        got += (size_t)r;
    }
    *data = buf;
    *size = want;
end:
    close(fd);
    return st;
}

/* Why libarchive could not write: its words are "Write error" for a failing write(2), so the
 * system's reason (a full disk) comes from its errno. */
static const char *write_why(struct archive *ar, const char *fallback)
{
    int e = archive_errno(ar);
    /* libarchive files its own complaints under EILSEQ (bad format) and EINVAL (bad call) */
    if (e > 0 && e != EILSEQ && e != EINVAL)
        return strerror(e);
    const char *s = archive_error_string(ar);
    return s ? s : fallback;
}

/* Failures to put bytes into the wheel are a failed packaging step (MD_ERR_BUILD), as for the
 * compilers: the output folder was usable, the writing into it went wrong (a full disk). */
static md_status write_member(struct archive *ar, const char *path, const void *data, size_t size,
                              bool executable, time_t mtime, md_error *err)
{
    struct archive_entry *entry = archive_entry_new();
    if (!entry)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_status st = MD_OK;
    archive_entry_set_pathname(entry, path);
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_set_perm(entry, executable ? 0755 : 0644);
    archive_entry_set_size(entry, (la_int64_t)size);
    /* Only mtime is set, so libarchive's "UT" extra field carries nothing else; uid and gid 0
     * make its "ux" field constant. Neither field can be switched off in libarchive 3.6. */
    archive_entry_set_mtime(entry, mtime, 0);
    archive_entry_set_uid(entry, 0);
    archive_entry_set_gid(entry, 0);
    if (archive_write_header(ar, entry) != ARCHIVE_OK) {
        st = md_fail(err, MD_ERR_BUILD, "cannot add '%s' to the wheel: %s", path, write_why(ar, "unknown error"));
        goto end;
    }
    const unsigned char *p = data;
    size_t left = size;
    while (left > 0) {
        la_ssize_t n = archive_write_data(ar, p, left);
        if (n <= 0) {
            st = md_fail(err, MD_ERR_BUILD, "cannot write '%s' into the wheel: %s", path, write_why(ar, "short write"));
            goto end;
        }
        p += n;
        left -= (size_t)n;
    }
    if (archive_write_finish_entry(ar) != ARCHIVE_OK)
        st = md_fail(err, MD_ERR_BUILD, "cannot finish '%s' in the wheel: %s", path, write_why(ar, "unknown error"));
end:
    archive_entry_free(entry);
    return st;
}

static md_status check_spec(const md_wheel_spec *spec, md_error *err)
{
    /* The limits keep the .dist-info paths inside the fixed buffers of md_wheel_write. */
    if (!spec->dist || !valid_dist(spec->dist) || strlen(spec->dist) > 200)
        return md_fail(err, MD_ERR_ARGUMENT, "invalid distribution name '%s'", spec->dist ? spec->dist : "");
    if (!spec->version || !valid_version(spec->version) || strlen(spec->version) > 64)
        return md_fail(err, MD_ERR_ARGUMENT, "invalid version '%s'", spec->version ? spec->version : "");
    const char *tags[3] = { spec->python_tag, spec->abi_tag, spec->platform_tag };
    const char *what[3] = { "python", "abi", "platform" };
    for (int i = 0; i < 3; i++)
        if (!tags[i] || !valid_tag_set(tags[i]))
            return md_fail(err, MD_ERR_ARGUMENT, "invalid %s tag '%s'", what[i], tags[i] ? tags[i] : "");
    if (!spec->output_dir || !*spec->output_dir)
        return md_fail(err, MD_ERR_ARGUMENT, "no output directory");
    if ((spec->summary && !is_one_line(spec->summary)) ||
        (spec->requires_python && !is_one_line(spec->requires_python)) ||
        (spec->description_content_type && !is_one_line(spec->description_content_type)))
        return md_fail(err, MD_ERR_ARGUMENT, "a metadata field has a line break");
    for (size_t i = 0; i < spec->n_requires_dist; i++)
        if (!spec->requires_dist[i] || !*spec->requires_dist[i] || !is_one_line(spec->requires_dist[i]))
            return md_fail(err, MD_ERR_ARGUMENT, "invalid Requires-Dist entry %zu", i + 1);
    if (spec->n_files && !spec->files)
        return md_fail(err, MD_ERR_ARGUMENT, "no file list");
    if (spec->source_date_epoch > MAX_EPOCH)
        return md_fail(err, MD_ERR_ARGUMENT, "source date epoch %lld is past 2099",
                       (long long)spec->source_date_epoch);
    return MD_OK;
}

/* One "Tag:" line for every python x abi x platform member of the '.'-joined sets. */
static void add_tag_lines(md_text_buf *b, const char *py, const char *abi, const char *plat)
{
    for (const char *p = py; *p;) {
        size_t pl = strcspn(p, ".");
        for (const char *a = abi; *a;) {
            size_t al = strcspn(a, ".");
            for (const char *q = plat; *q;) {
                size_t ql = strcspn(q, ".");
                md_buf_printf(b, "Tag: %.*s-%.*s-%.*s\n", (int)pl, p, (int)al, a, (int)ql, q);
                q += ql + (q[ql] == '.');
            }
            a += al + (a[al] == '.');
        }
        p += pl + (p[pl] == '.');
    }
}

static void build_metadata(md_text_buf *b, const md_wheel_spec *spec)
{
    md_buf_printf(b, "Metadata-Version: 2.1\nName: %s\nVersion: %s\n", spec->dist, spec->version);
    if (spec->summary)
        md_buf_printf(b, "Summary: %s\n", spec->summary);
    if (spec->requires_python)
        md_buf_printf(b, "Requires-Python: %s\n", spec->requires_python);
    for (size_t i = 0; i < spec->n_requires_dist; i++)
        md_buf_printf(b, "Requires-Dist: %s\n", spec->requires_dist[i]);
    if (spec->description_content_type)
        md_buf_printf(b, "Description-Content-Type: %s\n", spec->description_content_type);
    if (spec->description) {
        size_t len = strlen(spec->description);
        bool ends_line = len > 0 && spec->description[len - 1] == '\n';
        md_buf_printf(b, "\n%s%s", spec->description, ends_line ? "" : "\n");
    }
}

static void build_wheel_file(md_text_buf *b, const md_wheel_spec *spec)
{
    md_buf_printf(b, "Wheel-Version: 1.0\nGenerator: msda-doctor %s\nRoot-Is-Purelib: false\n",
               MD_VERSION);
    add_tag_lines(b, spec->python_tag, spec->abi_tag, spec->platform_tag);
}

/* Gathers and validates the payload and the generated METADATA and WHEEL, sorted. */
static md_status collect_members(const md_wheel_spec *spec, const char *dist_info, const md_text_buf *metadata,
                                 const md_text_buf *wheel, member **out, size_t *count, md_error *err)
{
    size_t n = spec->n_files + 2;
    member *m = calloc(n, sizeof *m);
    if (!m)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_status st = MD_OK;
    size_t prefix_len = strlen(dist_info);
    char generated[3][300];
    snprintf(generated[0], sizeof generated[0], "%s/METADATA", dist_info);
    snprintf(generated[1], sizeof generated[1], "%s/WHEEL", dist_info);
    snprintf(generated[2], sizeof generated[2], "%s/RECORD", dist_info);
    size_t filled = 0;
    for (size_t i = 0; i < spec->n_files; i++) {
        const md_wheel_file *f = &spec->files[i];
        if ((st = check_member_path(f->path, err)) != MD_OK)
            goto end;
        for (int g = 0; g < 3; g++)
            if (strcmp(f->path, generated[g]) == 0) {
                st = md_fail(err, MD_ERR_ARGUMENT, "'%s' is generated by the writer and cannot be given",
                             f->path);
                goto end;
            }
        if (!f->source_path && !f->data && f->size) {
            st = md_fail(err, MD_ERR_ARGUMENT, "member '%s' has neither a source file nor data", f->path);
            goto end;
        }
        m[filled].path = strdup(f->path);
        if (!m[filled].path) {
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
            goto end;
        }
        m[filled].file = f;
        m[filled].executable = f->executable;
        m[filled].dist_info = strncmp(f->path, dist_info, prefix_len) == 0 && f->path[prefix_len] == '/';
        filled++;
    }
    const md_text_buf *gen_text[2] = { metadata, wheel };
    for (int g = 0; g < 2; g++) {
        m[filled].path = strdup(generated[g]);
        if (!m[filled].path) {
            st = md_fail(err, MD_ERR_NOMEM, "out of memory");
            goto end;
        }
        m[filled].data = gen_text[g]->text;
        m[filled].size = gen_text[g]->len;
        m[filled].dist_info = true;
        filled++;
    }
    qsort(m, filled, sizeof *m, compare_members);
    for (size_t i = 1; i < filled; i++)
        if (strcmp(m[i - 1].path, m[i].path) == 0) {
            st = md_fail(err, MD_ERR_ARGUMENT, "member '%s' is given twice", m[i].path);
            goto end;
        }
end:
    if (st != MD_OK) {
        for (size_t i = 0; i < filled; i++)
            free(m[i].path);
        free(m);
        return st;
    }
    *out = m;
    *count = filled;
    return MD_OK;
}

/* Writes every member and RECORD into AR. */
static md_status write_members(struct archive *ar, const member *m, size_t count, const char *record_path,
                               time_t mtime, const int *write_error, md_error *err)
{
    md_text_buf record = { 0 };
    md_status st = MD_OK;
    for (size_t i = 0; i < count; i++) {
        void *loaded = NULL;
        const void *data = m[i].data;
        size_t size = m[i].size;
        if (m[i].file && m[i].file->source_path) {
            if ((st = read_source(m[i].file->source_path, &loaded, &size, err)) != MD_OK)
                goto end;
            data = loaded;
        } else if (m[i].file) {
            data = m[i].file->data;
            size = m[i].file->size;
        }
        char digest[MD_WHEEL_DIGEST_SIZE];
        st = sha256_record(data ? data : "", size, digest, err);
        if (st == MD_OK)
            st = write_member(ar, m[i].path, data ? data : "", size, m[i].executable, mtime, err);
        free(loaded);
        if (st != MD_OK || *write_error) /* a full disk: the rest would go nowhere */
            goto end;
        md_buf_printf(&record, "%s,sha256=%s,%zu\n", m[i].path, digest, size);
    }
    md_buf_printf(&record, "%s,,\n", record_path);
    if (record.failed) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    st = write_member(ar, record_path, record.text, record.len, false, mtime, err);
end:
    free(record.text);
    return st;
}

/* Where libarchive's bytes go. A failing write is recorded and the bytes are then taken as written:
 * libarchive 3.6, told of a failed write, leaves its deflate stream allocated (a leak on every
 * full disk), so it is let run to its end and the error is reported from here. */
typedef struct {
    int fd;
    int error; /* errno of the first failed write; nothing is written after it */
} wheel_sink;

static la_ssize_t sink_write(struct archive *ar, void *ctx, const void *data, size_t len)
{
    (void)ar;
    wheel_sink *sink = ctx;
    if (!sink->error)
        sink->error = md_write_all(sink->fd, data, len);
    return (la_ssize_t)len;
}

/* Writes the archive into the open file FD; NAME (the wheel) is for messages. */
static md_status write_archive(int fd, const char *name, const member *m, size_t count, const char *record_path,
                               time_t mtime, md_error *err)
{
    struct archive *ar = archive_write_new();
    if (!ar)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_status st = MD_OK;
    wheel_sink sink = { .fd = fd };
    /* No padding of the last block: a zip ends at its end-of-central-directory record. */
    if (archive_write_set_format_zip(ar) != ARCHIVE_OK ||
        archive_write_set_options(ar, "zip:compression=deflate") != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(ar, 1) != ARCHIVE_OK ||
        archive_write_open(ar, &sink, NULL, sink_write, NULL) != ARCHIVE_OK) {
        st = md_fail(err, MD_ERR_NOMEM, "cannot start the zip writer: %s", write_why(ar, "out of memory"));
        goto end;
    }
    /* libarchive writes zip (DOS) dates in local time: in UTC, the same inputs give the same
     * bytes in every time zone. The caller's zone is put back afterwards. */
    const char *zone = getenv("TZ");
    char *saved_zone = zone ? strdup(zone) : NULL;
    if (zone && !saved_zone) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    setenv("TZ", "UTC", 1);
    tzset();
    st = write_members(ar, m, count, record_path, mtime, &sink.error, err);
    /* Closing writes the central directory; its failure is a failed wheel. */
    if (archive_write_close(ar) != ARCHIVE_OK && st == MD_OK)
        st = md_fail(err, MD_ERR_BUILD, "cannot finish the wheel: %s", write_why(ar, "unknown error"));
    /* A failed write decides the message over what it made libarchive or the loop say. */
    if (sink.error)
        st = md_fail(err, MD_ERR_BUILD, "cannot write '%s': %s", name, strerror(sink.error));
    if (saved_zone)
        setenv("TZ", saved_zone, 1);
    else
        unsetenv("TZ");
    tzset();
    free(saved_zone);
end:
    archive_write_free(ar);
    return st;
}

md_status md_wheel_write(const md_wheel_spec *spec, char **written, md_error *err)
{
    if (written)
        *written = NULL;
    if (!spec)
        return md_fail(err, MD_ERR_ARGUMENT, "no wheel description");
    md_status st = check_spec(spec, err);
    if (st != MD_OK)
        return st;
    char dist[256];
    if ((st = md_wheel_normalize_dist(spec->dist, dist, sizeof dist, err)) != MD_OK)
        return st;
    char dist_info[300], record_path[320];
    snprintf(dist_info, sizeof dist_info, "%s-%s.dist-info", dist, spec->version);
    snprintf(record_path, sizeof record_path, "%s/RECORD", dist_info);
    char file_name[1024];
    if ((st = md_wheel_file_name(spec->dist, spec->version, spec->python_tag, spec->abi_tag, spec->platform_tag,
                                 file_name, sizeof file_name, err)) != MD_OK)
        return st;

    time_t mtime = spec->source_date_epoch ? spec->source_date_epoch : MD_WHEEL_DEFAULT_EPOCH;
    if (mtime < MD_WHEEL_MIN_EPOCH)
        mtime = MD_WHEEL_MIN_EPOCH;

    md_text_buf metadata = { 0 }, wheel = { 0 }, final_path = { 0 }, temp_path = { 0 };
    member *members = NULL;
    size_t n_members = 0;
    int fd;
    build_metadata(&metadata, spec);
    build_wheel_file(&wheel, spec);
    const char *dir = spec->output_dir;
    const char *sep = dir[strlen(dir) - 1] == '/' ? "" : "/";
    md_buf_printf(&final_path, "%s%s%s", dir, sep, file_name);
    md_buf_printf(&temp_path, "%s%s.%s-%s.whl.XXXXXX", dir, sep, dist, spec->version);
    if (metadata.failed || wheel.failed || final_path.failed || temp_path.failed) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    if ((st = collect_members(spec, dist_info, &metadata, &wheel, &members, &n_members, err)) != MD_OK)
        goto end;

    /* The temporary file sits beside the target so that rename() is atomic. */
    fd = mkostemp(temp_path.text, O_CLOEXEC);
    if (fd < 0) {
        st = md_fail(err, MD_ERR_IO, "cannot create a file in '%s': %s", dir, strerror(errno));
        goto end;
    }
    st = write_archive(fd, final_path.text, members, n_members, record_path, mtime, err);
    if (st == MD_OK && fchmod(fd, 0644) != 0)
        st = md_fail(err, MD_ERR_BUILD, "cannot set the mode of '%s': %s", temp_path.text, strerror(errno));
    /* A full disk may show only here, when the file system allocates the blocks. */
    if (st == MD_OK && fsync(fd) != 0)
        st = md_fail(err, MD_ERR_BUILD, "cannot write '%s': %s", temp_path.text, strerror(errno));
    if (close(fd) != 0 && st == MD_OK)
        st = md_fail(err, MD_ERR_BUILD, "cannot write '%s': %s", temp_path.text, strerror(errno));
    if (st == MD_OK && rename(temp_path.text, final_path.text) != 0)
        st = md_fail(err, MD_ERR_BUILD, "cannot rename '%s' to '%s': %s", temp_path.text, final_path.text,
                     strerror(errno));
    if (st != MD_OK) {
        unlink(temp_path.text);
        /* The member that failed is named already; the wheel it was going into is named first. */
        if (err && !strstr(err->message, final_path.text)) {
            char why[sizeof err->message];
            snprintf(why, sizeof why, "%s", err->message);
            md_fail(err, st, "'%s': %s", final_path.text, why);
        }
        goto end;
    }
    if (written) {
        *written = final_path.text;
        final_path.text = NULL;
    }
end:
    for (size_t i = 0; i < n_members; i++)
        free(members[i].path);
    free(members);
    free(metadata.text);
    free(wheel.text);
    free(final_path.text);
    free(temp_path.text);
    return st;
}
