#include "fetch_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Walks the '/'-separated NAME from depth DEPTH; false when a ".." climbs above depth 0. Returns
 * the final depth through *OUT. */
static bool walk(const char *name, int depth, int *out)
{
    const char *p = name;
    while (*p) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0)
                return false;
        } else if (len > 0 && !(len == 1 && p[0] == '.')) {
            depth++;
        }
        p += len + (slash ? 1 : 0);
    }
    *out = depth;
    return true;
}

static bool has_dotdot(const char *name)
{
    int depth;
    /* A ".." anywhere is refused, even one that would stay inside. */
    for (const char *p = name; (p = strstr(p, "..")) != NULL; p += 2)
        if ((p == name || p[-1] == '/') && (p[2] == '\0' || p[2] == '/'))
            return true;
    return !walk(name, 0, &depth);
}

/* NAME's part under TOP ("" for TOP itself) into *REST, or false when it is not under TOP. */
static bool under_top(const char *name, const char *top, const char **rest)
{
    if (name[0] == '.' && name[1] == '/')
        name += 2;
    size_t n = strlen(top);
    if (strncmp(name, top, n) != 0 || (name[n] != '\0' && name[n] != '/'))
        return false;
    *rest = name[n] ? name + n + 1 : name + n;
    return true;
}

/* A member path checked and mapped into ROOT. */
static md_status map_path(const char *archive, const char *name, const char *top, const char *root, char *out,
                          size_t size, const char **rest, md_error *err)
{
    if (name[0] == '/')
        return md_fail(err, MD_ERR_FORMAT, "'%s': member '%s' has an absolute path", archive, name);
    if (has_dotdot(name))
        return md_fail(err, MD_ERR_FORMAT, "'%s': member '%s' has a '..' in its path", archive, name);
    if (!under_top(name, top, rest))
        return md_fail(err, MD_ERR_FORMAT, "'%s': member '%s' is not under '%s/'", archive, name, top);
    int w = snprintf(out, size, "%s/%s", root, *rest);
    if (w < 0 || (size_t)w >= size)
        return md_fail(err, MD_ERR_FORMAT, "'%s': member '%s' has too long a path", archive, name);
    return MD_OK;
}

static md_status copy_data(struct archive *in, struct archive *out, const char *archive, const char *name,
                           md_error *err)
{
    const void *buf;
    size_t size;
    la_int64_t offset;
    for (;;) {
        int r = archive_read_data_block(in, &buf, &size, &offset);
        if (r == ARCHIVE_EOF)
            return MD_OK;
        if (r != ARCHIVE_OK)
            return md_fail(err, MD_ERR_FORMAT, "'%s': cannot read member '%s': %s", archive, name,
                           archive_error_string(in));
        if (archive_write_data_block(out, buf, size, offset) != ARCHIVE_OK)
            return md_fail(err, MD_ERR_IO, "cannot write '%s': %s", name, archive_error_string(out));
    }
}

static md_status unpack_entry(struct archive *in, struct archive *out, struct archive_entry *e, const char *path,
                              md_unpack_kind kind, const char *top, const char *root, bool *taken, md_error *err)
{
    *taken = false;
    /* A copy: archive_entry_set_pathname below frees the string libarchive hands out, and the
     * messages after it still name the member. */
    const char *stored = archive_entry_pathname(e);
    if (!stored)
        return md_fail(err, MD_ERR_FORMAT, "'%s': a member without a name", path);
    char name[PATH_MAX];
    if (snprintf(name, sizeof name, "%s", stored) >= (int)sizeof name)
        return md_fail(err, MD_ERR_FORMAT, "'%s': a member name longer than %d bytes", path, PATH_MAX - 1);
    char target[PATH_MAX];
    const char *rest;
    if (kind == MD_UNPACK_WHEEL && name[0] != '/' && !has_dotdot(name) && !under_top(name, top, &rest))
        return MD_OK; /* the wheel's metadata and Python files: not part of the toolkit */
    md_status st = map_path(path, name, top, root, target, sizeof target, &rest, err);
    if (st != MD_OK)
        return st;
    *taken = true;
    if (!*rest)
        return MD_OK; /* the top folder itself is ROOT */

    const char *hardlink = archive_entry_hardlink(e);
    mode_t type = archive_entry_filetype(e);
    if (hardlink) {
        char link_target[PATH_MAX];
        const char *link_rest;
        st = map_path(path, hardlink, top, root, link_target, sizeof link_target, &link_rest, err);
        if (st != MD_OK)
            return st;
        archive_entry_set_hardlink(e, link_target);
    } else if (type == AE_IFLNK) {
        const char *to = archive_entry_symlink(e);
        int depth;
        /* Resolved from the link's own folder: its depth under ROOT is its components less one. */
        if (!to || !*to || to[0] == '/' || !walk(rest, 0, &depth) || !walk(to, depth - 1, &depth))
            return md_fail(err, MD_ERR_FORMAT, "'%s': symlink '%s' -> '%s' points outside the toolkit", path,
                           name, to ? to : "");
    } else if (type != AE_IFREG && type != AE_IFDIR) {
        return md_fail(err, MD_ERR_FORMAT, "'%s': member '%s' is not a file, folder or link", path, name);
    }
    if (kind == MD_UNPACK_WHEEL && type == AE_IFREG) {
        /* Wheels keep their builder's modes (0744 for NVIDIA's tools): a toolkit is for every user. */
        mode_t mode = archive_entry_perm(e);
        archive_entry_set_perm(e, (mode & 0111) ? 0755 : 0644);
    }
    archive_entry_set_pathname(e, target);
    if (archive_write_header(out, e) != ARCHIVE_OK)
        return md_fail(err, MD_ERR_IO, "cannot write '%s': %s", target, archive_error_string(out));
    if (type == AE_IFREG && !hardlink && archive_entry_size(e) > 0) {
        st = copy_data(in, out, path, name, err);
        if (st != MD_OK)
            return st;
    }
    if (archive_write_finish_entry(out) != ARCHIVE_OK)
        return md_fail(err, MD_ERR_IO, "cannot write '%s': %s", target, archive_error_string(out));
    return MD_OK;
}

md_status md_unpack_archive(const char *path, md_unpack_kind kind, const char *top, const char *root,
                            md_error *err)
{
    struct archive *in = archive_read_new();
    struct archive *out = archive_write_disk_new();
    md_status st = MD_OK;
    if (!in || !out) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
        goto end;
    }
    if (kind == MD_UNPACK_WHEEL) {
        /* The central directory is the zip's truth; a streaming read would trust local headers. */
        archive_read_support_format_zip_seekable(in);
    } else {
        archive_read_support_filter_all(in);
        archive_read_support_format_tar(in);
    }
    /* Our own checks come first; these make libarchive refuse the same things again, and
     * writing through a symlink that an earlier member made. No owners: a root user would
     * otherwise take the uid of NVIDIA's build machine. */
    archive_write_disk_set_options(out, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                            ARCHIVE_EXTRACT_SECURE_NODOTDOT);
    if (archive_read_open_filename(in, path, 65536) != ARCHIVE_OK) {
        st = md_fail(err, MD_ERR_FORMAT, "cannot read archive '%s': %s", path, archive_error_string(in));
        goto end;
    }
    unsigned members = 0;
    for (;;) {
        struct archive_entry *e;
        int r = archive_read_next_header(in, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r != ARCHIVE_OK) {
            st = md_fail(err, MD_ERR_FORMAT, "cannot read archive '%s': %s", path, archive_error_string(in));
            goto end;
        }
        bool taken;
        st = unpack_entry(in, out, e, path, kind, top, root, &taken, err);
        if (st != MD_OK)
            goto end;
        members += taken;
    }
    if (members == 0)
        st = kind == MD_UNPACK_WHEEL ? md_fail(err, MD_ERR_FORMAT, "wheel '%s' holds nothing under '%s/'", path, top)
                                     : md_fail(err, MD_ERR_FORMAT, "archive '%s' is empty", path);
end:
    if (in)
        archive_read_free(in);
    if (out)
        archive_write_free(out);
    return st;
}
