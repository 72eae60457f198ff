#include "fetch.h"
#include "pip_config.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "fetch_cache.h"
#include "fetch_index.h"
#include "fetch_unpack.h"
#include "sha256_file.h"
#include "recipes/toolkit_table.h"

#define MAX_MANIFEST_BYTES (8u << 20)
#define ARCHIVE_SUFFIX ".tar.xz"

/* MAJOR.MINOR or MAJOR.MINOR.PATCH, digits only: it becomes part of a URL and of a folder name. */
static bool parse_version(const char *v, unsigned *major, unsigned *minor)
{
    unsigned patch;
    int used = 0;
    if (!isdigit((unsigned char)v[0]))
        return false;
    if (sscanf(v, "%4u.%4u%n", major, minor, &used) == 2 && v[used] == '\0')
        return true;
    used = 0;
    return sscanf(v, "%4u.%4u.%4u%n", major, minor, &patch, &used) == 3 && v[used] == '\0' &&
           !strchr(v, '+') && !strchr(v, '-') && !strchr(v, ' ');
}

static md_status make_dirs(const char *path, md_error *err)
{
    char buf[PATH_MAX];
    if (!*path)
        return md_fail(err, MD_ERR_ARGUMENT, "the destination folder is empty");
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return md_fail(err, MD_ERR_ARGUMENT, "'%s' is too long a path", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", buf, strerror(errno));
        *p = c;
        if (!c)
            break;
    }
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", path, strerror(errno ? errno : ENOTDIR));
    return MD_OK;
}

/* A relative_path that joins safely onto a URL and whose last part names a local file. */
static bool safe_relative_path(const char *p)
{
    if (!*p || p[0] == '/' || strstr(p, "..") || strstr(p, "//"))
        return false;
    for (const char *c = p; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("._-+/", *c))
            return false;
    size_t n = strlen(p), s = strlen(ARCHIVE_SUFFIX);
    return n > s && strcmp(p + n - s, ARCHIVE_SUFFIX) == 0 && p[n - s - 1] != '/';
}

/* One component of the manifest into C. MD_OK with C->name empty when an optional component
 * is not there for PLATFORM. */
static md_status read_component(json_t *manifest, const md_redist_component *rc, const char *platform,
                                const char *base, const char *manifest_url, md_fetch_component *c, md_error *err)
{
    memset(c, 0, sizeof *c);
    json_t *comp = json_object_get(manifest, rc->name);
    json_t *entry = json_object_get(comp, platform);
    if (!json_is_object(comp) || !json_is_object(entry)) {
        if (!rc->required)
            return MD_OK;
        if (!json_is_object(comp))
            return md_fail(err, MD_ERR_FORMAT, "manifest '%s' has no '%s'", manifest_url, rc->name);
        return md_fail(err, MD_ERR_ARGUMENT, "manifest '%s' has no '%s' for %s", manifest_url, rc->name, platform);
    }
    const char *rel = json_string_value(json_object_get(entry, "relative_path"));
    const char *sha = json_string_value(json_object_get(entry, "sha256"));
    json_t *size = json_object_get(entry, "size");
    const char *version = json_string_value(json_object_get(comp, "version"));
    if (!rel || !safe_relative_path(rel))
        return md_fail(err, MD_ERR_FORMAT, "manifest '%s': '%s' for %s has no usable 'relative_path'", manifest_url,
                       rc->name, platform);
    if (!sha || !md_is_sha256_hex(sha))
        return md_fail(err, MD_ERR_FORMAT, "manifest '%s': '%s' for %s has no 'sha256' of 64 hex digits",
                       manifest_url, rc->name, platform);
    if (size) {
        /* NVIDIA writes the size as a string; a number is taken too. */
        const char *s = json_string_value(size);
        char *end = NULL;
        errno = 0;
        unsigned long long n = s ? strtoull(s, &end, 10) : 0;
        if (s && (!*s || *end || errno || !isdigit((unsigned char)s[0])))
            return md_fail(err, MD_ERR_FORMAT, "manifest '%s': '%s' for %s has a bad 'size'", manifest_url,
                           rc->name, platform);
        if (!s && (!json_is_integer(size) || json_integer_value(size) < 0))
            return md_fail(err, MD_ERR_FORMAT, "manifest '%s': '%s' for %s has a bad 'size'", manifest_url,
                           rc->name, platform);
        c->size = s ? n : (uint64_t)json_integer_value(size);
    }
    snprintf(c->name, sizeof c->name, "%s", rc->name);
    snprintf(c->version, sizeof c->version, "%s", version ? version : "");
    for (char *p = c->sha256; *sha; sha++)
        *p++ = (char)tolower((unsigned char)*sha);
    if (snprintf(c->url, sizeof c->url, "%s/%s", base, rel) >= (int)sizeof c->url)
        return md_fail(err, MD_ERR_FORMAT, "manifest '%s': '%s' has too long a path", manifest_url, rc->name);
    /* The archive's file name is the last part of its path; its top folder, that less .tar.xz. */
    const char *last = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    if (strlen(last) >= sizeof c->file || strlen(last) - strlen(ARCHIVE_SUFFIX) >= sizeof c->top)
        return md_fail(err, MD_ERR_FORMAT, "manifest '%s': '%s' has too long a file name", manifest_url, rc->name);
    snprintf(c->file, sizeof c->file, "%s", last);
    snprintf(c->top, sizeof c->top, "%.*s", (int)(strlen(last) - strlen(ARCHIVE_SUFFIX)), last);
    return MD_OK;
}

static md_status path_join(char *out, size_t size, const char *dir, const char *name, md_error *err)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size)
        return md_fail(err, MD_ERR_ARGUMENT, "'%s/%s' is too long a path", dir, name);
    return MD_OK;
}

/* Brings component C's archive into DL_DIR, checked: an earlier run's verified file serves as
 * it is; otherwise the .part is resumed, and its sum checked before it takes the final name. */
static md_status download_one(md_fetch_component *c, const char *dl_dir, const md_http_options *http, char *file,
                              size_t fsize, md_error *err)
{
    char part[PATH_MAX], hex[65];
    const char *name = c->file;
    md_status st = path_join(file, fsize, dl_dir, name, err);
    if (st == MD_OK)
        st = path_join(part, sizeof part, dl_dir, name, err);
    if (st != MD_OK)
        return st;
    strncat(part, ".part", sizeof part - strlen(part) - 1);
    if (access(file, F_OK) == 0) {
        if (md_sha256_file(file, hex, NULL) == MD_OK && strcmp(hex, c->sha256) == 0)
            return MD_OK;
        unlink(file);
    }
    st = md_http_download(c->url, part, c->size, c->name, http, &c->resumed_from, err);
    if (st != MD_OK)
        return st;
    c->downloaded = true;
    st = md_sha256_file(part, hex, err);
    if (st != MD_OK)
        return st;
    if (strcmp(hex, c->sha256) != 0) {
        /* A bad prefix would poison every resume: the whole file goes. */
        unlink(part);
        return md_fail(err, MD_ERR_CHECKSUM, "sha256 mismatch for %s (%s): expected %s, got %s", c->name, name,
                       c->sha256, hex);
    }
    if (rename(part, file) != 0)
        return md_fail(err, MD_ERR_IO, "cannot rename '%s': %s", part, strerror(errno));
    return MD_OK;
}

static md_status read_manifest(const md_fetch_request *req, const char *base, md_fetch_result *out,
                               const md_redist_table *table, md_error *err)
{
    char *body = NULL;
    size_t len = 0;
    md_status st = md_http_get(out->manifest_url, &req->http, MAX_MANIFEST_BYTES, &body, &len, err);
    if (st == MD_ERR_NETWORK && err && strstr(err->message, "HTTP 404") && strchr(req->version, '.') ==
        strrchr(req->version, '.')) {
        /* "11.8" is how users name it; NVIDIA's manifests are per release. */
        size_t n = strlen(err->message);
        snprintf(err->message + n, sizeof err->message - n, " (NVIDIA names manifests by release: %s.0, ...)",
                 req->version);
    }
    if (st != MD_OK)
        return st;
    st = md_fetch_manifest_parse(body, len, base, table, out, err);
    free(body);
    return st;
}

md_status md_fetch_manifest_parse(const char *body, size_t len, const char *base, const md_redist_table *table,
                                  md_fetch_result *out, md_error *err)
{
    md_status st = MD_OK;
    json_error_t jerr;
    json_t *doc = json_loadb(body, len, 0, &jerr);
    if (!json_is_object(doc)) {
        st = doc ? md_fail(err, MD_ERR_FORMAT, "manifest '%s' is not a JSON object", out->manifest_url)
                 : md_fail(err, MD_ERR_FORMAT, "manifest '%s' is not JSON: line %d: %s", out->manifest_url,
                           jerr.line, jerr.text);
        json_decref(doc);
        return st;
    }
    const char *label = json_string_value(json_object_get(doc, "release_label"));
    snprintf(out->release_label, sizeof out->release_label, "%s", label ? label : "");
    for (size_t i = 0; i < table->n_components && st == MD_OK; i++) {
        md_fetch_component *c = &out->components[out->n_components];
        st = read_component(doc, &table->components[i], out->platform, base, out->manifest_url, c, err);
        if (st == MD_OK && c->name[0])
            out->n_components++;
    }
    json_decref(doc);
    return st;
}

/* A wheel's local name: the index's, checked, since it names a file in the download folder. */
static bool safe_wheel_name(const char *name)
{
    for (const char *c = name; *c; c++)
        if (!isalnum((unsigned char)*c) && !strchr("._-+", *c))
            return false;
    return name[0] != '.';
}

/* The wheel of package PKG on PAGE, for MACHINE and MAJOR.MINOR (PINNED where the page has it),
 * as OUT's next component. */
static md_status take_wheel(const md_index_page *page, const md_wheel_package *pkg, const md_wheel_major *wm,
                            const char *machine, unsigned major, unsigned minor, const char *pinned,
                            md_fetch_result *out, md_error *err)
{
    const md_index_file *f = md_index_pick(page, pkg->name, machine, major, minor, pinned);
    if (!f && !md_index_has_release(page, pkg->name, major, minor))
        return md_fail(err, MD_ERR_ARGUMENT, "the index '%s' has no release %u.%u of '%s'", out->index_url, major,
                       minor, pkg->name);
    if (!f)
        return md_fail(err, MD_ERR_ARGUMENT, "the index '%s' has no '%s' %u.%u wheel for %s (manylinux_%s)",
                       out->index_url, pkg->name, major, minor, out->platform, machine);
    if (!f->sha256[0])
        return md_fail(err, MD_ERR_FORMAT, "the index '%s' gives no sha256 for '%s'", out->index_url, f->filename);
    if (!safe_wheel_name(f->filename))
        return md_fail(err, MD_ERR_FORMAT, "the index '%s' names a wheel '%s' that is no file name", out->index_url,
                       f->filename);
    md_fetch_component *c = &out->components[out->n_components++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", pkg->name);
    snprintf(c->version, sizeof c->version, "%s", f->version);
    snprintf(c->url, sizeof c->url, "%s", f->url);
    snprintf(c->sha256, sizeof c->sha256, "%s", f->sha256);
    snprintf(c->file, sizeof c->file, "%s", f->filename);
    snprintf(c->top, sizeof c->top, "%s", wm->root);
    c->size = f->size;
    c->wheel = true;
    return MD_OK;
}

/* The wheel of each package of recipe WM, from the index OUT names, into OUT's components. */
static md_status read_wheels(const md_fetch_request *req, const md_wheel_major *wm, const char *machine,
                             unsigned major, unsigned minor, md_fetch_result *out, md_error *err)
{
    md_status st = MD_OK;
    for (size_t i = 0; i < wm->n_packages && st == MD_OK; i++) {
        const md_wheel_package *pkg = &wm->packages[i];
        const char *pinned = NULL;
        for (size_t k = 0; k < out->n_components && pkg->same_version_as[0]; k++)
            if (strcmp(out->components[k].name, pkg->same_version_as) == 0)
                pinned = out->components[k].version;
        md_index_page page;
        st = md_index_read(out->index_url, pkg->name, &req->http, &page, err);
        if (st == MD_ERR_NETWORK && err && strstr(err->message, "HTTP 404")) {
            size_t n = strlen(err->message);
            snprintf(err->message + n, sizeof err->message - n, " (the index has no project '%s')", pkg->name);
        }
        if (st == MD_OK)
            st = take_wheel(&page, pkg, wm, machine, major, minor, pinned, out, err);
        md_index_page_free(&page);
    }
    return st;
}

/* Which wheels make CUDA MAJOR for PLATFORM: the recipe and the manylinux machine, or why not. */
static md_status wheel_recipe(const md_redist_table *table, const char *version, unsigned major, unsigned minor,
                              const char *platform, const md_wheel_major **wm, const char **machine, md_error *err)
{
    if (table->n_wheel_majors == 0)
        return md_fail(err, MD_ERR_INTERNAL, "recipes/redist.json names no wheels");
    if (strchr(version, '.') != strrchr(version, '.'))
        return md_fail(err, MD_ERR_ARGUMENT, "give the CUDA version for wheels as MAJOR.MINOR (%u.%u), not '%s': "
                       "each wheel takes its newest %u.%u release", major, minor, version, major, minor);
    *wm = md_redist_wheel_major(table, major);
    if (!*wm)
        return md_hint_set(err, MD_HINT_REDIST,
                           md_fail(err, MD_ERR_ARGUMENT, "no NVIDIA compiler wheels are known for CUDA %u; fetch "
                                   "CUDA %u.%u from NVIDIA's redistributable manifests instead", major, major, minor));
    if ((*wm)->refused[0]) {
        char wanted[16];
        const md_toolkit_row *row;
        snprintf(wanted, sizeof wanted, "%u.%u", major, minor);
        row = md_toolkit_row_find(wanted);
        return md_hint_set(err, MD_HINT_REDIST,
                           md_fail(err, MD_ERR_ARGUMENT, "%s, so CUDA %s cannot be fetched as wheels; fetch release "
                                   "%s%s from NVIDIA's redistributable manifests instead", (*wm)->refused, wanted,
                                   row && row->redist_release[0] ? row->redist_release : "RELEASE",
                                   row && row->redist_release[0] ? "" : " (MAJOR.MINOR.PATCH, as NVIDIA names it)"));
    }
    *machine = md_redist_wheel_machine(table, platform);
    if (!*machine)
        return md_fail(err, MD_ERR_ARGUMENT, "NVIDIA's compiler wheels are not built for %s", platform);
    return MD_OK;
}

/* Unpacks every archive into a fresh folder beside the toolkit's place and renames it there. */
static md_status install(md_fetch_result *out, const md_fetch_paths *paths, md_error *err)
{
    char staging[PATH_MAX];
    snprintf(staging, sizeof staging, "%s", paths->staging);
    if (!mkdtemp(staging))
        return md_fail(err, MD_ERR_IO, "cannot create a folder in '%s': %s", paths->version_dir, strerror(errno));
    md_status st = MD_OK;
    for (size_t i = 0; i < out->n_components && st == MD_OK; i++) {
        const md_fetch_component *c = &out->components[i];
        char file[PATH_MAX];
        st = path_join(file, sizeof file, paths->download, c->file, err);
        if (st == MD_OK)
            st = md_unpack_archive(file, c->wheel ? MD_UNPACK_WHEEL : MD_UNPACK_REDIST, c->top, staging, err);
        /* An unsafe archive is unsafe whatever its sum said: do not keep it for a next run. */
        if (st == MD_ERR_FORMAT)
            unlink(file);
    }
    char nvcc[PATH_MAX];
    if (st == MD_OK && path_join(nvcc, sizeof nvcc, staging, "bin/nvcc", err) == MD_OK && access(nvcc, X_OK) != 0)
        st = md_fail(err, MD_ERR_FORMAT, "the %s of CUDA %s hold no bin/nvcc",
                     out->index_url[0] ? "wheels" : "archives", out->version);
    /* mkdtemp made it 0700: the toolkit is for every user, like the folders unpacked in it. */
    if (st == MD_OK && chmod(staging, 0755) != 0)
        st = md_fail(err, MD_ERR_IO, "cannot chmod '%s': %s", staging, strerror(errno));
    if (st == MD_OK && rename(staging, out->toolkit_dir) != 0)
        st = md_fail(err, MD_ERR_IO, "cannot rename '%s' to '%s': %s", staging, out->toolkit_dir, strerror(errno));
    if (st != MD_OK)
        md_remove_tree(staging);
    return st;
}

/* The fetch proper, once the request is checked and PATHS are known. */
static md_status fetch_into(const md_fetch_request *req, const md_redist_table *table, const char *base,
                            const md_wheel_major *wm, const char *machine, unsigned major, unsigned minor,
                            const md_fetch_paths *paths, md_fetch_result *out, md_error *err)
{
    struct stat sb;
    md_status st;
    if (lstat(out->toolkit_dir, &sb) == 0) {
        char nvcc[PATH_MAX];
        if ((st = path_join(nvcc, sizeof nvcc, out->toolkit_dir, "bin/nvcc", err)) != MD_OK)
            return st;
        if (access(nvcc, X_OK) != 0)
            return md_fail(err, MD_ERR_IO, "'%s' exists and holds no bin/nvcc; remove it first", out->toolkit_dir);
        out->already_present = true;
        return MD_OK;
    }
    st = req->wheels ? read_wheels(req, wm, machine, major, minor, out, err)
                     : read_manifest(req, base, out, table, err);
    if (st != MD_OK)
        return st;
    if ((st = make_dirs(paths->version_dir, err)) != MD_OK)
        return st;
    if (mkdir(paths->download, 0755) != 0 && errno != EEXIST)
        return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", paths->download, strerror(errno));
    /* Every archive is checked before any is unpacked. */
    for (size_t i = 0; i < out->n_components; i++) {
        char file[PATH_MAX];
        st = download_one(&out->components[i], paths->download, &req->http, file, sizeof file, err);
        if (st != MD_OK)
            return st;
    }
    st = install(out, paths, err);
    if (st == MD_OK)
        md_remove_tree(paths->download);
    return st;
}

md_status md_fetch_toolkit(const md_fetch_request *req, md_fetch_result *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    unsigned major, minor;
    if (!req->version || strlen(req->version) >= sizeof out->version || !parse_version(req->version, &major, &minor))
        return md_fail(err, MD_ERR_ARGUMENT, "'%s' is not a CUDA version such as 11.8.0",
                       req->version ? req->version : "");
    snprintf(out->version, sizeof out->version, "%s", req->version);
    const md_redist_table *table = md_redist_table_get(err);
    if (!table)
        return err ? err->code : MD_ERR_INTERNAL;

    const char *platform = req->platform;
    if (!platform) {
        struct utsname u;
        if (uname(&u) != 0 || !(platform = md_redist_host_platform(table, u.machine)))
            return md_hint_set(err, MD_HINT_PLATFORM,
                               md_fail(err, MD_ERR_ARGUMENT, "no CUDA redist platform for this machine"));
    }
    if (!md_redist_platform_known(table, platform)) {
        char names[128];
        md_redist_platform_names(table, names, sizeof names);
        return md_fail(err, MD_ERR_ARGUMENT, "unknown platform '%s' (%s)", platform, names);
    }
    snprintf(out->platform, sizeof out->platform, "%s", platform);

    char base[768];
    const md_wheel_major *wm = NULL;
    const char *machine = NULL;
    const char *b = req->wheels ? (req->index_url && *req->index_url ? req->index_url : table->index_url)
                                : (req->mirror && *req->mirror ? req->mirror : table->base_url);
    if (snprintf(base, sizeof base, "%s", b) >= (int)sizeof base)
        return md_fail(err, MD_ERR_ARGUMENT, "%s URL '%s' is too long", req->wheels ? "index" : "mirror", b);
    for (size_t n = strlen(base); n > 0 && base[n - 1] == '/'; n--)
        base[n - 1] = '\0';
    md_status st;
    if (req->wheels) {
        if ((st = wheel_recipe(table, req->version, major, minor, platform, &wm, &machine, err)) != MD_OK)
            return st;
        snprintf(out->index_url, sizeof out->index_url, "%s", base);
        st = md_http_url_allowed(out->index_url, req->http.allow_http, err);
    } else {
        snprintf(out->manifest_url, sizeof out->manifest_url, "%s/redistrib_%s.json", base, req->version);
        st = md_http_url_allowed(out->manifest_url, req->http.allow_http, err);
    }
    if (st != MD_OK)
        return st;

    char parent[PATH_MAX];
    st = make_dirs(req->dest, err);
    if (st != MD_OK)
        return st;
    /* Canonical, so that libarchive's symlink and ".." checks see no link or ".." of the user's. */
    if (!realpath(req->dest, parent))
        return md_fail(err, MD_ERR_IO, "cannot resolve '%s': %s", req->dest, strerror(errno));
    md_fetch_paths *paths = malloc(sizeof *paths);
    if (!paths)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    st = md_fetch_cache_paths(parent, major, minor, platform, paths, err);
    if (st == MD_OK) {
        snprintf(out->toolkit_dir, sizeof out->toolkit_dir, "%s", paths->toolkit);
        st = fetch_into(req, table, base, wm, machine, major, minor, paths, out, err);
        if (st != MD_OK) {
            /* What this run made and left empty goes; a download kept for a resume stays. */
            char top[PATH_MAX];
            rmdir(paths->download);
            rmdir(paths->version_dir);
            snprintf(top, sizeof top, "%s", paths->version_dir);
            *strrchr(top, '/') = '\0';
            rmdir(top);
        }
    }
    free(paths);
    return st;
}

md_fetch_request md_fetch_request_defaults(void)
{
    return (md_fetch_request){ .mirror = getenv(MD_FETCH_MIRROR_ENV),
                               .http = { .retries = MD_FETCH_DEFAULT_RETRIES,
                                         .connect_timeout_s = MD_FETCH_DEFAULT_TIMEOUT_S,
                                         .stall_timeout_s = MD_FETCH_DEFAULT_TIMEOUT_S } };
}

bool md_fetch_pip_index(char *index, size_t index_size, char *source, size_t source_size)
{
    return md_pip_index_url(index, index_size, source, source_size);
}
