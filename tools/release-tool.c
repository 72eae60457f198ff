/* Packs the portable msda-doctor (release/release.mk) for users, and checks that it is portable.
 *   release-tool check BINARY CPU
 *       BINARY is an ELF executable for CPU that needs no glibc symbol newer than 2.17 and links
 *       only glibc's own libraries; prints what it needs. Exit 1 naming what breaks that.
 *   release-tool pack BINARY CPU VERSION OUTDIR MANPAGE NOTICES...
 *       after the check, writes into OUTDIR
 *         msda-doctor-VERSION-linux-CPU.tar.gz: msda-doctor-VERSION-linux-CPU/bin/msda-doctor,
 *             share/man/man1/msda-doctor.1, share/doc/msda-doctor/NOTICES/<each NOTICES file>;
 *         msda_doctor-VERSION-py3-none-<manylinux tag>.whl: the same files as the wheel's data
 *             (bin/ as its scripts, with the executable bit), so that pip, pipx and uvx put
 *             msda-doctor on PATH.
 *       Each NOTICES argument is a folder whose files are copied under their paths relative to
 *       it, or a file. The tag is computed from BINARY's glibc symbol versions, as the op's wheel.
 * Both are written under a temporary name and renamed into place complete; the archive's
 * members have fixed owners and times (SOURCE_DATE_EPOCH, else the wheel writer's default), so
 * the same inputs give the same bytes. Exit 2 for a usage error, 1 for anything else. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "binary/elf_glibc.h"
#include "build/wheel.h"
#include "recipes/product.h"

/* glibc's own libraries: what a binary may link and still run on any glibc system with nothing
 * else installed (manylinux's list without libgcc_s, libstdc++ and libz, which are not glibc). */
static const char *const glibc_libraries[] = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
};

typedef struct {
    char rel[PATH_MAX];    /* inside the package root: "bin/msda-doctor" */
    char source[PATH_MAX];
    bool executable;
} member;

typedef struct {
    member *items;
    size_t n, cap;
} members;

static int fail(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "release-tool: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return 1;
}

static bool is_glibc_library(const char *soname)
{
    for (size_t i = 0; i < sizeof glibc_libraries / sizeof *glibc_libraries; i++)
        if (strcmp(soname, glibc_libraries[i]) == 0)
            return true;
    return false;
}

/* The check; the platform tag into TAG when it passes. */
static int check(const char *binary, const char *cpu, char *tag, size_t tag_size)
{
    md_elf_glibc info;
    md_error err;
    if (md_elf_glibc_read_file(binary, MD_GLIBC_FLOOR_MAJOR, MD_GLIBC_FLOOR_MINOR, &info, &err) != MD_OK) {
        md_elf_glibc_free(&info);
        return fail("%s: %s", binary, err.message);
    }
    int rc = 0;
    char above[512] = "";
    for (size_t i = 0; i < info.n_above && strlen(above) < sizeof above - 80; i++)
        snprintf(above + strlen(above), sizeof above - strlen(above), "%s%s@%s", i ? ", " : "", info.above[i].symbol,
                 info.above[i].version_name);
    if (!info.machine_name || strcmp(info.machine_name, cpu) != 0)
        rc = fail("%s: not an ELF file for %s", binary, cpu);
    else if (info.glibc_private)
        rc = fail("%s: needs GLIBC_PRIVATE%s", binary, "");
    else if (info.n_above)
        rc = fail("%s: needs glibc newer than 2.17: %s", binary, above);
    for (size_t i = 0; rc == 0 && i < info.n_needed; i++)
        if (!is_glibc_library(info.needed[i].soname))
            rc = fail("%s: links %s, which is not one of glibc's libraries", binary, info.needed[i].soname);
    if (rc == 0 && md_wheel_platform_tag(cpu, info.glibc.major, info.glibc.minor, tag, tag_size, &err) != MD_OK)
        rc = fail("%s: %s", binary, err.message);
    if (rc == 0) {
        printf("%s: %s, highest glibc symbol version %s, needs", binary, cpu,
               info.glibc_name[0] ? info.glibc_name : "none");
        for (size_t i = 0; i < info.n_needed; i++)
            printf(" %s", info.needed[i].soname);
        printf("\n");
    }
    md_elf_glibc_free(&info);
    return rc;
}

static bool add(members *m, const char *rel, const char *source, bool executable)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        member *items = realloc(m->items, cap * sizeof *items);
        if (!items)
            return false;
        m->items = items;
        m->cap = cap;
    }
    member *e = &m->items[m->n++];
    snprintf(e->rel, sizeof e->rel, "%s", rel);
    snprintf(e->source, sizeof e->source, "%s", source);
    e->executable = executable;
    return true;
}

/* Every regular file under DIR (recursively, sorted) as PREFIX/<path below DIR>. */
static bool add_tree(members *m, const char *dir, const char *prefix)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return false;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        char path[PATH_MAX], rel[PATH_MAX];
        struct stat st;
        if (ok && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
            snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
            snprintf(rel, sizeof rel, "%s/%s", prefix, name) < (int)sizeof rel && stat(path, &st) == 0)
            ok = S_ISDIR(st.st_mode) ? add_tree(m, path, rel) : !S_ISREG(st.st_mode) || add(m, rel, path, false);
        free(names[i]);
    }
    free(names);
    return ok;
}

static time_t epoch(void)
{
    const char *e = getenv("SOURCE_DATE_EPOCH");
    return e && *e ? (time_t)strtoll(e, NULL, 10) : MD_WHEEL_DEFAULT_EPOCH;
}

/* DIR/NAME through a temporary name in DIR. */
static int write_tarball(const members *m, const char *top, const char *dir, const char *name)
{
    char final[PATH_MAX], tmp[PATH_MAX];
    snprintf(final, sizeof final, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, name);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return fail("cannot write in '%s': %s", dir, strerror(errno));
    struct archive *a = archive_write_new();
    bool ok = a && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK &&
              archive_write_add_filter_gzip(a) == ARCHIVE_OK &&
              archive_write_set_filter_option(a, "gzip", "timestamp", NULL) == ARCHIVE_OK &&
              archive_write_open_fd(a, fd) == ARCHIVE_OK;
    for (size_t i = 0; ok && i < m->n; i++) {
        FILE *f = fopen(m->items[i].source, "rb");
        struct stat st;
        if (!f || fstat(fileno(f), &st) != 0) {
            ok = false;
            if (f)
                fclose(f);
            break;
        }
        char path[PATH_MAX * 2];
        snprintf(path, sizeof path, "%s/%s", top, m->items[i].rel);
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, path);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, m->items[i].executable ? 0755 : 0644);
        archive_entry_set_size(e, st.st_size);
        archive_entry_set_mtime(e, epoch(), 0);
        archive_entry_set_uname(e, "root");
        archive_entry_set_gname(e, "root");
        ok = archive_write_header(a, e) == ARCHIVE_OK;
        char buf[65536];
        size_t got;
        while (ok && (got = fread(buf, 1, sizeof buf, f)) > 0)
            ok = archive_write_data(a, buf, got) == (la_ssize_t)got;
        ok = ok && !ferror(f);
        fclose(f);
        archive_entry_free(e);
    }
    const char *why = a && archive_error_string(a) ? archive_error_string(a) : "cannot read an input";
    ok = ok && archive_write_close(a) == ARCHIVE_OK;
    archive_write_free(a);
    ok = close(fd) == 0 && ok && chmod(tmp, 0644) == 0 && rename(tmp, final) == 0;
    if (!ok) {
        unlink(tmp);
        return fail("cannot write '%s': %s", final, why);
    }
    printf("%s\n", final);
    return 0;
}

static int write_wheel(const members *m, const char *version, const char *tag, const char *dir)
{
    char data_dir[128];
    snprintf(data_dir, sizeof data_dir, "%s-%s.data", "msda_doctor", version);
    md_wheel_file *files = calloc(m->n, sizeof *files);
    char (*paths)[PATH_MAX] = calloc(m->n, sizeof *paths);
    if (!files || !paths) {
        free(files);
        free(paths);
        return fail("out of memory%s%s", "", "");
    }
    for (size_t i = 0; i < m->n; i++) {
        /* bin/ goes to the scripts, installed on PATH; the rest under the environment's prefix. */
        const char *rel = m->items[i].rel;
        if (strncmp(rel, "bin/", 4) == 0)
            snprintf(paths[i], PATH_MAX, "%s/scripts/%s", data_dir, rel + 4);
        else
            snprintf(paths[i], PATH_MAX, "%s/data/%s", data_dir, rel);
        files[i] = (md_wheel_file){ .path = paths[i], .source_path = m->items[i].source,
                                    .executable = m->items[i].executable };
    }
    md_wheel_spec spec = {
        .dist = "msda-doctor", .version = version, .python_tag = "py3", .abi_tag = "none", .platform_tag = tag,
        .output_dir = dir, .summary = "Build doctor and cross-arch packager for Multi-Scale Deformable Attention",
        .requires_python = ">=3.7", .files = files, .n_files = m->n, .source_date_epoch = epoch(),
    };
    char *written = NULL;
    md_error err;
    md_status st = md_wheel_write(&spec, &written, &err);
    if (st == MD_OK)
        printf("%s\n", written);
    free(written);
    free(files);
    free(paths);
    return st == MD_OK ? 0 : fail("%s%s", err.message, "");
}

static int pack(int argc, char **argv)
{
    const char *binary = argv[0], *cpu = argv[1], *version = argv[2], *dir = argv[3], *man = argv[4];
    char tag[MD_WHEEL_TAG_MAX];
    int rc = check(binary, cpu, tag, sizeof tag);
    if (rc)
        return rc;
    members m = { 0 };
    bool ok = add(&m, "bin/msda-doctor", binary, true) && add(&m, "share/man/man1/msda-doctor.1", man, false);
    for (int i = 5; ok && i < argc; i++) {
        struct stat st;
        const char *base = strrchr(argv[i], '/');
        char rel[PATH_MAX];
        snprintf(rel, sizeof rel, "share/doc/msda-doctor/NOTICES/%s", base ? base + 1 : argv[i]);
        if (stat(argv[i], &st) != 0) {
            free(m.items);
            return fail("cannot read '%s': %s", argv[i], strerror(errno));
        }
        ok = S_ISDIR(st.st_mode) ? add_tree(&m, argv[i], "share/doc/msda-doctor/NOTICES") : add(&m, rel, argv[i], false);
    }
    char top[PATH_MAX], name[PATH_MAX + 8];
    snprintf(top, sizeof top, "msda-doctor-%s-linux-%s", version, cpu);
    snprintf(name, sizeof name, "%s.tar.gz", top);
    rc = ok ? write_tarball(&m, top, dir, name) : fail("cannot list the notices%s%s", "", "");
    if (rc == 0)
        rc = write_wheel(&m, version, tag, dir);
    free(m.items);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "check") == 0) {
        char tag[MD_WHEEL_TAG_MAX];
        return check(argv[2], argv[3], tag, sizeof tag);
    }
    if (argc >= 7 && strcmp(argv[1], "pack") == 0)
        return pack(argc - 2, argv + 2);
    fprintf(stderr, "usage: release-tool check BINARY CPU\n"
                    "       release-tool pack BINARY CPU VERSION OUTDIR MANPAGE [NOTICES...]\n");
    return 2;
}
