/* The glibc floor reader on shared objects built at test time for both CPUs: by the host gcc
 * for the host's CPU and by Debian's cross gcc for the other one, so that the suite is the same
 * on x86_64 and aarch64 hosts. On Debian 12 (glibc 2.36) a plain dlopen call binds
 * to dlopen@GLIBC_2.34 and raises the floor; ".symver" pins the base version (GLIBC_2.2.5 on
 * x86_64, GLIBC_2.17 on aarch64). Damaged copies fail with MD_ERR_FORMAT and never crash. */
#include <errno.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "binary/elf_glibc.h"
#include "unit.h"

extern char **environ;

#if defined(__aarch64__)
#define X86_CC "x86_64-linux-gnu-gcc"
#define ARM_CC "gcc"
#define CROSS_CC X86_CC
#define X86_IS_CROSS true
#else
#define X86_CC "gcc"
#define ARM_CC "aarch64-linux-gnu-gcc"
#define CROSS_CC ARM_CC
#define X86_IS_CROSS false
#endif

/* Built once, before the tests fork (an unchecked fixture); a failure is kept for the tests. */
static char work_dir[512];
static char build_error[1024];
static bool have_cross;

static const char NEW_DLOPEN_C[] =
    "#include <dlfcn.h>\n"
    "void *open_driver(void) { return dlopen(\"libcuda.so.1\", RTLD_LAZY); }\n";

static const char OLD_DLOPEN_X86_C[] =
    "#include <dlfcn.h>\n"
    "__asm__(\".symver dlopen,dlopen@GLIBC_2.2.5\");\n"
    "void *open_driver(void) { return dlopen(\"libcuda.so.1\", RTLD_LAZY); }\n";

static const char OLD_DLOPEN_ARM_C[] =
    "#include <dlfcn.h>\n"
    "__asm__(\".symver dlopen,dlopen@GLIBC_2.17\");\n"
    "void *open_driver(void) { return dlopen(\"libcuda.so.1\", RTLD_LAZY); }\n";

static const char DEP_C[] = "int dep_value(void) { return 42; }\n";
static const char USES_DEP_C[] = "int dep_value(void);\nint twice(void) { return 2 * dep_value(); }\n";

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

static bool write_source(const char *name, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", work_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Runs ARGV (found on PATH) in work_dir; true when it exits 0. */
static bool run_tool(char *const argv[])
{
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addchdir_np(&actions, work_dir);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        snprintf(build_error, sizeof build_error, "cannot run %s: %s", argv[0], strerror(rc));
        return false;
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(build_error, sizeof build_error, "%s failed building %s", argv[0], argv[4]);
        return false;
    }
    return true;
}

static bool compile_so(const char *cc, const char *out, const char *src, const char *extra1,
                       const char *extra2)
{
    char *argv[12] = { (char *)cc, "-shared", "-fPIC", "-o", (char *)out, (char *)src, "-O1", NULL };
    int n = 7;
    if (extra1)
        argv[n++] = (char *)extra1;
    if (extra2)
        argv[n++] = (char *)extra2;
    argv[n] = NULL;
    return run_tool(argv);
}

static bool tool_exists(const char *name)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char dir[4096];
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, ":");
        snprintf(dir, sizeof dir, "%.*s/%s", (int)len, p, name);
        if (access(dir, X_OK) == 0)
            return true;
        p += len + (p[len] == ':');
    }
    return false;
}

static void build_objects(void)
{
    build_error[0] = '\0';
    const char *base = getenv("TMPDIR");
    snprintf(work_dir, sizeof work_dir, "%s/msda-elf-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(work_dir)) {
        snprintf(build_error, sizeof build_error, "mkdtemp: %s", strerror(errno));
        return;
    }
    if (!write_source("new.c", NEW_DLOPEN_C) || !write_source("old_x86.c", OLD_DLOPEN_X86_C) ||
        !write_source("old_arm.c", OLD_DLOPEN_ARM_C) || !write_source("dep.c", DEP_C) ||
        !write_source("uses_dep.c", USES_DEP_C)) {
        snprintf(build_error, sizeof build_error, "cannot write sources in %s", work_dir);
        return;
    }
    /* -ldl keeps libdl.so.2 in DT_NEEDED on glibcs that still have a separate libdl. */
    if (!compile_so("gcc", "libdep.so", "dep.c", "-Wl,-soname,libmsdatestdep.so.1", NULL) ||
        !compile_so("gcc", "uses_dep.so", "uses_dep.c", "-Wl,--no-as-needed", "libdep.so") ||
        !compile_so("gcc", "host_new.so", "new.c", NULL, NULL))
        return;
    have_cross = tool_exists(CROSS_CC);
    if (have_cross || !X86_IS_CROSS)
        if (!compile_so(X86_CC, "x86_new.so", "new.c", NULL, NULL) ||
            !compile_so(X86_CC, "x86_old.so", "old_x86.c", "-ldl", NULL))
            return;
    if (have_cross || X86_IS_CROSS)
        if (!compile_so(ARM_CC, "arm_new.so", "new.c", NULL, NULL) ||
            !compile_so(ARM_CC, "arm_old.so", "old_arm.c", "-ldl", NULL))
            return;
}

static void remove_objects(void)
{
    if (work_dir[0])
        nftw(work_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void need_objects(void)
{
    ck_assert_msg(build_error[0] == '\0', "test objects not built: %s", build_error);
}

static void need_cross(void)
{
    need_objects();
    if (!have_cross)
        ck_assert_msg(getenv("MSDA_ALLOW_NO_CROSS") != NULL,
                      CROSS_CC " missing: run scripts/install-deps --test");
}

static md_elf_glibc read_ok(const char *name, unsigned floor_major, unsigned floor_minor)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", work_dir, name);
    md_elf_glibc info;
    md_error err;
    md_error_clear(&err);
    ck_assert_msg(md_elf_glibc_read_file(path, floor_major, floor_minor, &info, &err) == MD_OK, "%s: %s",
                  name, err.message);
    return info;
}

static bool needs_library(const md_elf_glibc *info, const char *soname)
{
    for (size_t i = 0; i < info->n_needed; i++)
        if (strcmp(info->needed[i].soname, soname) == 0)
            return true;
    return false;
}

START_TEST(version_names_parse)
{
    md_glibc_version v;
    ck_assert(md_glibc_version_parse("GLIBC_2.34", &v));
    ck_assert_uint_eq(v.major, 2);
    ck_assert_uint_eq(v.minor, 34);
    ck_assert_uint_eq(v.patch, 0);
    ck_assert(md_glibc_version_parse("GLIBC_2.2.5", &v));
    ck_assert_uint_eq(v.minor, 2);
    ck_assert_uint_eq(v.patch, 5);
    const char *bad[] = { "GLIBC_PRIVATE", "GLIBCXX_3.4.30", "GLIBC_2", "GLIBC_2.34x", "GLIBC_.3",
                          "glibc_2.3", "GLIBC_2.3.", "GLIBC_ABI_DT_RELR", "GLIBC-2.17", "" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!md_glibc_version_parse(bad[i], &v), "'%s' parsed", bad[i]);
    md_glibc_version a = { 2, 2, 5 }, b = { 2, 17, 0 }, c = { 2, 17, 0 };
    ck_assert_int_lt(md_glibc_version_compare(a, b), 0);
    ck_assert_int_gt(md_glibc_version_compare(b, a), 0);
    ck_assert_int_eq(md_glibc_version_compare(b, c), 0);
}
END_TEST

/* True when the objects of one CPU are there to test: always for the host's CPU; for the other one
 * only with its cross compiler, which install-deps --test installs. */
static bool need_platform(bool is_cross)
{
    if (!is_cross) {
        need_objects();
        return true;
    }
    need_cross();
    return have_cross;
}

START_TEST(x86_64_dlopen_raises_floor)
{
    if (!need_platform(X86_IS_CROSS))
        return;
    md_elf_glibc info = read_ok("x86_new.so", 2, 17);
    ck_assert_uint_eq(info.machine, 62);
    ck_assert_str_eq(info.machine_name, "x86_64");
    ck_assert_uint_eq(info.glibc.major, 2);
    ck_assert_uint_eq(info.glibc.minor, 34);
    ck_assert_uint_eq(info.glibc.patch, 0);
    ck_assert_str_eq(info.glibc_name, "GLIBC_2.34");
    ck_assert(!info.glibc_private);
    ck_assert_uint_eq(info.n_above, 1);
    ck_assert_str_eq(info.above[0].symbol, "dlopen");
    ck_assert_str_eq(info.above[0].version_name, "GLIBC_2.34");
    ck_assert(needs_library(&info, "libc.so.6"));
    md_error err;
    ck_assert_int_eq(md_elf_check_libraries(&info, &err), MD_OK);
    ck_assert_uint_eq(info.n_disallowed, 0);
    md_elf_glibc_free(&info);

    /* With the floor at 2.34 nothing is above it. */
    info = read_ok("x86_new.so", 2, 34);
    ck_assert_uint_eq(info.n_above, 0);
    md_elf_glibc_free(&info);
}
END_TEST

START_TEST(x86_64_symver_keeps_base)
{
    if (!need_platform(X86_IS_CROSS))
        return;
    md_elf_glibc info = read_ok("x86_old.so", 2, 17);
    ck_assert_uint_eq(info.machine, 62);
    ck_assert_uint_eq(info.glibc.major, 2);
    ck_assert_uint_eq(info.glibc.minor, 2);
    ck_assert_uint_eq(info.glibc.patch, 5);
    ck_assert_str_eq(info.glibc_name, "GLIBC_2.2.5");
    ck_assert_uint_eq(info.n_above, 0);
    md_error err;
    ck_assert_int_eq(md_elf_check_libraries(&info, &err), MD_OK);
    ck_assert_uint_eq(info.n_disallowed, 0);
    md_elf_glibc_free(&info);
    /* Below the base version, every glibc symbol is above the floor. */
    info = read_ok("x86_old.so", 2, 1);
    ck_assert_uint_ge(info.n_above, 1);
    md_elf_glibc_free(&info);
}
END_TEST

START_TEST(aarch64_dlopen_raises_floor)
{
    if (!need_platform(!X86_IS_CROSS))
        return;
    md_elf_glibc info = read_ok("arm_new.so", 2, 17);
    ck_assert_uint_eq(info.machine, 183);
    ck_assert_str_eq(info.machine_name, "aarch64");
    ck_assert_str_eq(info.glibc_name, "GLIBC_2.34");
    ck_assert_uint_eq(info.glibc.minor, 34);
    ck_assert_uint_eq(info.n_above, 1);
    ck_assert_str_eq(info.above[0].symbol, "dlopen");
    ck_assert_str_eq(info.above[0].version_name, "GLIBC_2.34");
    md_elf_glibc_free(&info);
}
END_TEST

START_TEST(aarch64_symver_keeps_base)
{
    if (!need_platform(!X86_IS_CROSS))
        return;
    md_elf_glibc info = read_ok("arm_old.so", 2, 17);
    ck_assert_uint_eq(info.machine, 183);
    ck_assert_str_eq(info.glibc_name, "GLIBC_2.17");
    ck_assert_uint_eq(info.glibc.major, 2);
    ck_assert_uint_eq(info.glibc.minor, 17);
    ck_assert_uint_eq(info.glibc.patch, 0);
    ck_assert_uint_eq(info.n_above, 0);
    md_error err;
    ck_assert_int_eq(md_elf_check_libraries(&info, &err), MD_OK);
    ck_assert_uint_eq(info.n_disallowed, 0);
    md_elf_glibc_free(&info);
}
END_TEST

START_TEST(unlisted_library_flagged)
{
    need_objects();
    md_elf_glibc info = read_ok("uses_dep.so", 2, 17);
    ck_assert(needs_library(&info, "libmsdatestdep.so.1"));
    md_error err;
    ck_assert_int_eq(md_elf_check_libraries(&info, &err), MD_OK);
    ck_assert_uint_eq(info.n_disallowed, 1);
    for (size_t i = 0; i < info.n_needed; i++)
        ck_assert_msg(info.needed[i].allowed == (strcmp(info.needed[i].soname, "libmsdatestdep.so.1") != 0),
                      "%s marked %d", info.needed[i].soname, info.needed[i].allowed);
    md_elf_glibc_free(&info);
}
END_TEST

static uint8_t *load(const char *name, size_t *size)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", work_dir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    ck_assert_int_gt(n, 0);
    uint8_t *buf = malloc((size_t)n);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

/* Reads a damaged copy: it may still be readable, but may only fail as a format problem. */
static void read_damaged(const uint8_t *good, size_t size, size_t keep, size_t flip_at, uint8_t flip,
                         uint8_t *scratch)
{
    memcpy(scratch, good, keep);
    if (flip_at < keep)
        scratch[flip_at] ^= flip;
    md_elf_glibc info;
    md_error err;
    md_error_clear(&err);
    md_status st = md_elf_glibc_read(scratch, keep, 2, 17, &info, &err);
    ck_assert_msg(st == MD_OK || st == MD_ERR_FORMAT || st == MD_ERR_UNKNOWN_TYPE,
                  "size %zu of %zu, byte %zu ^ %#x: status %d (%s)", keep, size, flip_at, flip, st,
                  err.message);
    md_elf_glibc_free(&info);
}

START_TEST(damaged_objects_fail_cleanly)
{
    need_objects();
    size_t size;
    uint8_t *good = load("host_new.so", &size);
    uint8_t *scratch = malloc(size);
    ck_assert_ptr_nonnull(scratch);
    for (size_t keep = 0; keep < size; keep += keep < 256 ? 1 : 61)
        read_damaged(good, size, keep, size, 0, scratch);
    for (size_t at = 0; at < size; at += at < 128 ? 1 : 3) {
        read_damaged(good, size, size, at, 0xff, scratch);
        read_damaged(good, size, size, at, 0x01, scratch);
    }
    /* Specific damage, specific answers. */
    md_elf_glibc info;
    md_error err;
    memcpy(scratch, good, size);
    memcpy(scratch, "\x7f" "ELG", 4);
    ck_assert_int_eq(md_elf_glibc_read(scratch, size, 2, 17, &info, &err), MD_ERR_UNKNOWN_TYPE);
    md_elf_glibc_free(&info);
    ck_assert_int_eq(md_elf_glibc_read(good, size / 2, 2, 17, &info, &err), MD_ERR_FORMAT);
    md_elf_glibc_free(&info);
    free(scratch);
    free(good);
}
END_TEST

START_TEST(files_that_are_not_objects)
{
    need_objects();
    md_elf_glibc info;
    md_error err;
    char path[700];
    snprintf(path, sizeof path, "%s/new.c", work_dir);
    ck_assert_int_eq(md_elf_glibc_read_file(path, 2, 17, &info, &err), MD_ERR_UNKNOWN_TYPE);
    ck_assert_ptr_nonnull(strstr(err.message, "new.c"));
    snprintf(path, sizeof path, "%s/absent.so", work_dir);
    ck_assert_int_eq(md_elf_glibc_read_file(path, 2, 17, &info, &err), MD_ERR_IO);
    ck_assert_int_eq(md_elf_glibc_read_file(work_dir, 2, 17, &info, &err), MD_ERR_IO);
    md_elf_glibc_free(&info);
}
END_TEST

Suite *suite_elf_glibc(void)
{
    Suite *s = suite_create("elf_glibc");
    TCase *tc = tcase_create("elf_glibc");
    tcase_add_unchecked_fixture(tc, build_objects, remove_objects);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, version_names_parse);
    tcase_add_test(tc, x86_64_dlopen_raises_floor);
    tcase_add_test(tc, x86_64_symver_keeps_base);
    tcase_add_test(tc, aarch64_dlopen_raises_floor);
    tcase_add_test(tc, aarch64_symver_keeps_base);
    tcase_add_test(tc, unlisted_library_flagged);
    tcase_add_test(tc, damaged_objects_fail_cleanly);
    tcase_add_test(tc, files_that_are_not_objects);
    suite_add_tcase(s, tc);
    return s;
}
