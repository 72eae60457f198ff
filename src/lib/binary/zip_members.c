#include "zip_members.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/write_all.h"

#define BLOCK_SIZE 65536

struct md_zip {
    struct archive *ar;
    struct archive_entry *entry; /* ours, see md_zip_next */
    int fd;           /* ours: archive_read_free does not close it */
    char *path;
    char *member;     /* the current member's name, for messages after the entry is gone */
    void *block;      /* what the read callback hands libarchive */
    bool has_declared;
    uint64_t declared; /* the entries the end of the central directory declares */
    uint64_t seen;     /* the members libarchive gave */
};

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p) { return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16; }
static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* The entry count that the end-of-central-directory record declares (zip64's when the classic
 * record defers to it), read from the file's tail: libarchive lists the members it finds and
 * never compares their number with this one, so a zip claiming more than it holds would pass
 * as whole. False when no such record is found (libarchive then refuses the file anyway). */
static bool declared_entries(int fd, uint64_t *count)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 22)
        return false;
    /* The record is 22 bytes plus a comment of at most 65535. */
    size_t tail = st.st_size < 22 + 65535 ? (size_t)st.st_size : 22 + 65535;
    unsigned char *buf = malloc(tail);
    if (!buf)
        return false;
    off_t base = st.st_size - (off_t)tail;
    bool found = pread(fd, buf, tail, base) == (ssize_t)tail;
    size_t at = tail - 22;
    for (; found; at--) {
        if (le32(buf + at) == 0x06054b50 && at + 22 + le16(buf + at + 20) == tail)
            break;
        if (at == 0)
            found = false;
    }
    if (found) {
        *count = le16(buf + at + 10);
        unsigned char loc[20], rec[56];
        /* zip64: the classic fields are saturated and a locator sits just before the record. */
        if (*count == 0xFFFF && base + (off_t)at >= 20 && pread(fd, loc, 20, base + (off_t)at - 20) == 20 &&
            le32(loc) == 0x07064b50) {
            uint64_t rec_off = le64(loc + 8);
            found = rec_off <= (uint64_t)st.st_size - 56 && pread(fd, rec, 56, (off_t)rec_off) == 56 &&
                    le32(rec) == 0x06064b50;
            if (found)
                *count = le64(rec + 32);
        }
    }
    free(buf);
    return found;
}

static const char *why(struct archive *ar, const char *fallback)
{
    const char *s = archive_error_string(ar);
    return s ? s : fallback;
}

/* libarchive reports a failed allocation like damage: with ENOMEM as its error number, or (zlib's
 * inflateInit, its own open) with none, where errno, cleared before the call, holds the failed
 * malloc's ENOMEM. That is not a corrupt file, and must not be called one. */
static bool out_of_memory(struct archive *ar)
{
    return archive_errno(ar) == ENOMEM || errno == ENOMEM;
}

static md_status fail_nomem(struct archive *ar, const char *path, md_error *err)
{
    return md_fail(err, MD_ERR_NOMEM, "out of memory reading '%s': %s", path, why(ar, "no memory"));
}

void md_zip_close(md_zip *zip)
{
    if (!zip)
        return;
    if (zip->ar)
        archive_read_free(zip->ar);
    if (zip->entry)
        archive_entry_free(zip->entry);
    free(zip->block);
    if (zip->fd >= 0)
        close(zip->fd);
    free(zip->path);
    free(zip->member);
    free(zip);
}

/* ---- the reader's callbacks over our descriptor ---------------------------------------------------
 * In place of archive_read_open_fd, which in libarchive 3.6 ignores a failed allocation of its
 * own and then crashes in archive_read_open1. */

static la_ssize_t read_block(struct archive *ar, void *ctx, const void **buffer)
{
    md_zip *zip = ctx;
    *buffer = zip->block;
    for (;;) {
        ssize_t n = read(zip->fd, zip->block, BLOCK_SIZE);
        if (n >= 0)
            return n;
        if (errno != EINTR) {
            archive_set_error(ar, errno, "%s", strerror(errno));
            return -1;
        }
    }
}

static la_int64_t skip_bytes(struct archive *ar, void *ctx, la_int64_t request)
{
    (void)ar;
    md_zip *zip = ctx;
    off_t from = lseek(zip->fd, 0, SEEK_CUR);
    /* 0 makes libarchive read over the bytes instead, as for a pipe. */
    if (from < 0 || lseek(zip->fd, request, SEEK_CUR) < 0)
        return 0;
    return request;
}

static la_int64_t seek_to(struct archive *ar, void *ctx, la_int64_t offset, int whence)
{
    md_zip *zip = ctx;
    off_t at = lseek(zip->fd, offset, whence);
    if (at < 0) {
        archive_set_error(ar, errno, "%s", strerror(errno));
        return ARCHIVE_FATAL;
    }
    return at;
}

/* Takes FD whatever happens. */
static md_status open_taken_fd(int fd, const char *path, md_zip **out, md_error *err)
{
    *out = NULL;
    md_zip *zip = calloc(1, sizeof *zip);
    if (!zip) {
        close(fd);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    zip->fd = fd;
    /* archive_read_new, too, ignores a failed allocation of its entry, which the first
     * archive_read_next_header then uses: md_zip_next passes this one instead. */
    if (!(zip->path = strdup(path)) || !(zip->block = malloc(BLOCK_SIZE)) || !(zip->entry = archive_entry_new()) ||
        !(zip->ar = archive_read_new())) {
        md_zip_close(zip);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    /* Its failure (out of memory) leaves a reader that crashes when opened: checked first. */
    if (archive_read_support_format_zip(zip->ar) != ARCHIVE_OK) {
        md_status st = md_fail(err, MD_ERR_NOMEM, "cannot set up the zip reader for '%s': %s", path,
                               why(zip->ar, "out of memory"));
        md_zip_close(zip);
        return st;
    }
    if (archive_read_set_read_callback(zip->ar, read_block) != ARCHIVE_OK ||
        archive_read_set_skip_callback(zip->ar, skip_bytes) != ARCHIVE_OK ||
        archive_read_set_seek_callback(zip->ar, seek_to) != ARCHIVE_OK ||
        archive_read_set_callback_data(zip->ar, zip) != ARCHIVE_OK) {
        md_zip_close(zip);
        return md_fail(err, MD_ERR_NOMEM, "cannot set up the zip reader for '%s': out of memory", path);
    }
    errno = 0;
    if (archive_read_open1(zip->ar) != ARCHIVE_OK) {
        md_status st = out_of_memory(zip->ar) ? fail_nomem(zip->ar, path, err)
                       : md_fail(err, MD_ERR_FORMAT, "'%s' is not a readable zip archive: %s", path,
                                 why(zip->ar, "unreadable"));
        md_zip_close(zip);
        return st;
    }
    zip->has_declared = declared_entries(zip->fd, &zip->declared);
    *out = zip;
    return MD_OK;
}

md_status md_zip_open(const char *path, md_zip **out, md_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    return open_taken_fd(fd, path, out, err);
}

md_status md_zip_open_fd(int fd, const char *path, md_zip **out, md_error *err)
{
    *out = NULL;
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
        return md_fail(err, MD_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    if (lseek(own, 0, SEEK_SET) != 0) {
        md_status st = md_fail(err, MD_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        close(own);
        return st;
    }
    return open_taken_fd(own, path, out, err);
}

md_status md_zip_next(md_zip *zip, md_zip_member *member, bool *end, md_error *err)
{
    *end = false;
    free(zip->member);
    zip->member = NULL;
    struct archive_entry *entry = zip->entry;
    errno = 0;
    int r = archive_read_next_header2(zip->ar, entry);
    if (r == ARCHIVE_EOF) {
        *end = true;
        if (zip->has_declared && zip->seen != zip->declared)
            return md_fail(err, MD_ERR_FORMAT, "'%s' is a corrupt zip archive: its central directory declares %llu "
                           "entries, %llu found", zip->path, (unsigned long long)zip->declared,
                           (unsigned long long)zip->seen);
        return MD_OK;
    }
    /* a warning ends the walk too: a member libarchive doubts is not one to check or load */
    if (r != ARCHIVE_OK)
        return out_of_memory(zip->ar) ? fail_nomem(zip->ar, zip->path, err)
               : md_fail(err, MD_ERR_FORMAT, "'%s' is a corrupt zip archive: %s", zip->path,
                         why(zip->ar, "unreadable entry"));
    const char *name = archive_entry_pathname(entry);
    if (!name)
        return md_fail(err, MD_ERR_FORMAT, "'%s': a member has no readable name", zip->path);
    if (!(zip->member = strdup(name)))
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    zip->seen++;
    mode_t type = archive_entry_filetype(entry);
    member->name = zip->member;
    member->type = type == AE_IFREG ? MD_ZIP_FILE : type == AE_IFDIR ? MD_ZIP_DIRECTORY : MD_ZIP_OTHER;
    member->size = archive_entry_size_is_set(entry) && archive_entry_size(entry) > 0
                       ? (uint64_t)archive_entry_size(entry) : 0;
    return MD_OK;
}

md_status md_zip_read(md_zip *zip, md_zip_sink sink, void *ctx, uint64_t *size, md_error *err)
{
    const char *name = zip->member ? zip->member : "?";
    const void *block;
    size_t len;
    la_int64_t offset;
    uint64_t done = 0;
    md_status st = MD_OK;
    int r;
    while ((errno = 0, r = archive_read_data_block(zip->ar, &block, &len, &offset)) == ARCHIVE_OK) {
        /* Zip members are contiguous; a hole would mean a sparse entry, which zips are not. */
        if (offset < 0 || (uint64_t)offset != done) {
            st = md_fail(err, MD_ERR_FORMAT, "'%s': member '%s' is not contiguous", zip->path, name);
            goto end;
        }
        if (len && (st = sink(block, len, ctx, err)) != MD_OK)
            goto end;
        done += len;
    }
    if (r != ARCHIVE_EOF)
        st = out_of_memory(zip->ar) ? fail_nomem(zip->ar, zip->path, err)
             : md_fail(err, MD_ERR_FORMAT, "'%s': member '%s' is corrupt: %s", zip->path, name,
                       why(zip->ar, "unreadable"));
end:
    if (size)
        *size = done;
    return st;
}

typedef struct {
    int fd;
    const md_zip *zip;
} fd_sink;

static md_status write_block(const void *data, size_t len, void *ctx, md_error *err)
{
    const fd_sink *to = ctx;
    int e = md_write_all(to->fd, data, len);
    if (e != 0)
        return md_fail(err, MD_ERR_IO, "cannot write '%s' of '%s': %s", to->zip->member, to->zip->path, strerror(e));
    return MD_OK;
}

md_status md_zip_read_to_fd(md_zip *zip, int fd, md_error *err)
{
    fd_sink to = { .fd = fd, .zip = zip };
    return md_zip_read(zip, write_block, &to, NULL, err);
}

md_status md_zip_extract(const char *path, const char *name, int fd, md_error *err)
{
    md_zip *zip;
    md_status st = md_zip_open(path, &zip, err);
    if (st != MD_OK)
        return st;
    md_zip_member m;
    bool end = false;
    while ((st = md_zip_next(zip, &m, &end, err)) == MD_OK && !end)
        if (m.type == MD_ZIP_FILE && strcmp(m.name, name) == 0)
            break;
    if (st == MD_OK && end)
        st = md_fail(err, MD_ERR_FORMAT, "'%s' has no %s", path, name);
    if (st == MD_OK)
        st = md_zip_read_to_fd(zip, fd, err);
    md_zip_close(zip);
    return st;
}
