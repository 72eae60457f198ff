/* The wheel writer: tags and names as docs/FACTS.md "Wheels" says, byte-identical output for the
 * same inputs, a RECORD that both md_wheel_verify_record and Python's zipfile+hashlib accept,
 * corruption caught, and no file left behind by a failed write. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "unit.h"
#include "build/package.h"
#include "binary/wheel_record.h"
#include "build/wheel.h"
#include "recipes/product.h"

extern char **environ;

#define EPOCH_2023_11_14 ((time_t)1700000000)

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

static void remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void make_temp_dir(char *dir, size_t size)
{
    const char *base = getenv("TMPDIR");
    snprintf(dir, size, "%s/msda-wheel-XXXXXX", base && *base ? base : "/tmp");
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static unsigned count_entries(const char *dir)
{
    unsigned n = 0;
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static unsigned char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void write_all(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, size, f), size);
    ck_assert_int_eq(fclose(f), 0);
}

/* A spec with a payload of in-memory and on-disk files, in an unsorted order. */
typedef struct {
    char dir[512];
    char source[600];
    md_wheel_file files[4];
    const char *requires[2];
    md_wheel_spec spec;
} sample;

static const char LOADER_PY[] = "from .ops import ms_deform_attn\n";
static const char OPS_PY[] = "def ms_deform_attn(*args):\n    raise NotImplementedError\n";
static const char TOOL_SH[] = "#!/bin/sh\necho msda\n";

static void sample_init(sample *s)
{
    memset(s, 0, sizeof *s);
    make_temp_dir(s->dir, sizeof s->dir);
    snprintf(s->source, sizeof s->source, "%s/libmsda.so.src", s->dir);
    /* Bytes that compress badly and hold NULs, like a shared library. */
    unsigned char lib[5000];
    for (size_t i = 0; i < sizeof lib; i++)
        lib[i] = (unsigned char)((i * 2654435761u) >> 13);
    write_all(s->source, lib, sizeof lib);
    s->files[0] = (md_wheel_file){ .path = "msda/ops.py", .data = OPS_PY, .size = sizeof OPS_PY - 1 };
    s->files[1] = (md_wheel_file){ .path = "msda/libmsda.so", .source_path = s->source };
    s->files[2] = (md_wheel_file){ .path = "msda/__init__.py", .data = LOADER_PY,
                                   .size = sizeof LOADER_PY - 1 };
    s->files[3] = (md_wheel_file){ .path = "msda/bin/msda-tool", .data = TOOL_SH, .size = sizeof TOOL_SH - 1,
                                   .executable = true };
    s->requires[0] = "numpy";
    s->requires[1] = "torch>=1.8; extra == \"torch\"";
    s->spec = (md_wheel_spec){
        .dist = "msda",
        .version = "0.1.0",
        .python_tag = "py3",
        .abi_tag = "none",
        .platform_tag = "manylinux_2_17_x86_64.manylinux2014_x86_64",
        .output_dir = s->dir,
        .summary = "Multi-Scale Deformable Attention",
        .requires_python = ">=3.8",
        .requires_dist = s->requires,
        .n_requires_dist = 2,
        .files = s->files,
        .n_files = 4,
        .source_date_epoch = EPOCH_2023_11_14,
    };
}

static char *write_ok(const md_wheel_spec *spec)
{
    md_error err;
    md_error_clear(&err);
    char *path = NULL;
    ck_assert_msg(md_wheel_write(spec, &path, &err) == MD_OK, "write: %s", err.message);
    ck_assert_ptr_nonnull(path);
    return path;
}

typedef struct {
    char name[256];
    mode_t perm;
    time_t mtime;
    char text[1024]; /* the first bytes, NUL-terminated */
} listed_member;

static size_t list_members(const char *path, listed_member *out, size_t max)
{
    struct archive *ar = archive_read_new();
    archive_read_support_format_zip(ar);
    ck_assert_int_eq(archive_read_open_filename(ar, path, 65536), ARCHIVE_OK);
    struct archive_entry *e;
    size_t n = 0;
    while (archive_read_next_header(ar, &e) == ARCHIVE_OK) {
        ck_assert_uint_lt(n, max);
        snprintf(out[n].name, sizeof out[n].name, "%s", archive_entry_pathname(e));
        out[n].perm = archive_entry_perm(e);
        out[n].mtime = archive_entry_mtime(e);
        la_ssize_t got = archive_read_data(ar, out[n].text, sizeof out[n].text - 1);
        ck_assert_int_ge(got, 0);
        out[n].text[got] = '\0';
        n++;
    }
    archive_read_free(ar);
    return n;
}

START_TEST(platform_tags)
{
    char tag[MD_WHEEL_TAG_MAX];
    md_error err;
    ck_assert_int_eq(md_wheel_platform_tag("x86_64", 2, 5, tag, sizeof tag, &err), MD_OK);
    ck_assert_str_eq(tag, "manylinux_2_17_x86_64.manylinux2014_x86_64");
    ck_assert_int_eq(md_wheel_platform_tag("x86_64", 2, 17, tag, sizeof tag, &err), MD_OK);
    ck_assert_str_eq(tag, "manylinux_2_17_x86_64.manylinux2014_x86_64");
    ck_assert_int_eq(md_wheel_platform_tag("aarch64", 2, 17, tag, sizeof tag, &err), MD_OK);
    ck_assert_str_eq(tag, "manylinux_2_17_aarch64.manylinux2014_aarch64");
    ck_assert_int_eq(md_wheel_platform_tag("aarch64", 0, 0, tag, sizeof tag, &err), MD_OK);
    ck_assert_str_eq(tag, "manylinux_2_17_aarch64.manylinux2014_aarch64");
    ck_assert_int_eq(md_wheel_platform_tag("x86_64", 2, 18, tag, sizeof tag, &err), MD_OK);
    ck_assert_str_eq(tag, "manylinux_2_18_x86_64");
    ck_assert_int_eq(md_wheel_platform_tag("aarch64", 2, 34, tag, sizeof tag, &err), MD_OK);
    ck_assert_str_eq(tag, "manylinux_2_34_aarch64");
    ck_assert_int_eq(md_wheel_platform_tag("armv7l", 2, 17, tag, sizeof tag, &err), MD_ERR_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "armv7l"));
    ck_assert_int_eq(md_wheel_platform_tag("x86_64", 3, 0, tag, sizeof tag, &err), MD_ERR_ARGUMENT);
    ck_assert_int_eq(md_wheel_platform_tag("x86_64", 1, 17, tag, sizeof tag, &err), MD_ERR_ARGUMENT);
    ck_assert_int_eq(md_wheel_platform_tag("x86_64", 2, 17, tag, 20, &err), MD_ERR_ARGUMENT);
}
END_TEST

/* The name diagnose's fixes give is the name build writes: both come from md_wheel_file_name. */
START_TEST(product_wheel_name)
{
    char out[256];
    md_error err;
    ck_assert_int_eq(md_package_wheel_name("x86_64", out, sizeof out, &err), MD_OK);
    ck_assert_str_eq(out, "msda-" MD_VERSION "-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl");
    ck_assert_int_eq(md_package_wheel_name("aarch64", out, sizeof out, &err), MD_OK);
    ck_assert_str_eq(out, "msda-" MD_VERSION "-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl");
    ck_assert_int_eq(md_package_wheel_name("armv7l", out, sizeof out, &err), MD_ERR_ARGUMENT);
    ck_assert_int_eq(md_package_wheel_name("x86_64", out, 20, &err), MD_ERR_ARGUMENT);
}
END_TEST

START_TEST(dist_names_normalised)
{
    char out[64];
    md_error err;
    ck_assert_int_eq(md_wheel_normalize_dist("msda", out, sizeof out, &err), MD_OK);
    ck_assert_str_eq(out, "msda");
    ck_assert_int_eq(md_wheel_normalize_dist("Multi-Scale.Deformable__Attn", out, sizeof out, &err), MD_OK);
    ck_assert_str_eq(out, "Multi_Scale_Deformable_Attn");
    ck_assert_int_eq(md_wheel_normalize_dist("a-_.-b", out, sizeof out, &err), MD_OK);
    ck_assert_str_eq(out, "a_b");
    ck_assert_int_eq(md_wheel_normalize_dist("abcdef", out, 4, &err), MD_ERR_ARGUMENT);
    ck_assert_int_eq(md_wheel_normalize_dist("", out, sizeof out, &err), MD_ERR_ARGUMENT);

    /* The file name and the .dist-info folder use the normalised name, METADATA the given one. */
    sample s;
    sample_init(&s);
    s.spec.dist = "Msda.Doctor--kernels";
    s.spec.platform_tag = "any";
    char *path = write_ok(&s.spec);
    char want[1024];
    snprintf(want, sizeof want, "%s/Msda_Doctor_kernels-0.1.0-py3-none-any.whl", s.dir);
    ck_assert_str_eq(path, want);
    listed_member m[16];
    size_t n = list_members(path, m, 16);
    ck_assert_str_eq(m[n - 1].name, "Msda_Doctor_kernels-0.1.0.dist-info/RECORD");
    ck_assert_str_eq(m[n - 3].name, "Msda_Doctor_kernels-0.1.0.dist-info/METADATA");
    ck_assert_ptr_nonnull(strstr(m[n - 3].text, "\nName: Msda.Doctor--kernels\n"));
    free(path);
    remove_tree(s.dir);
}
END_TEST

START_TEST(same_inputs_same_bytes)
{
    sample s;
    sample_init(&s);
    char *first = write_ok(&s.spec);
    size_t size1, size2;
    unsigned char *bytes1 = read_all(first, &size1);
    /* A second directory and a second write over the first: the path plays no part. */
    char other[512];
    make_temp_dir(other, sizeof other);
    s.spec.output_dir = other;
    char *second = write_ok(&s.spec);
    unsigned char *bytes2 = read_all(second, &size2);
    ck_assert_uint_eq(size1, size2);
    ck_assert_msg(memcmp(bytes1, bytes2, size1) == 0, "two writes of the same wheel differ");
    free(bytes2);
    s.spec.output_dir = s.dir;
    free(write_ok(&s.spec));
    bytes2 = read_all(first, &size2);
    ck_assert_uint_eq(size1, size2);
    ck_assert_msg(memcmp(bytes1, bytes2, size1) == 0, "rewriting the wheel changed it");
    /* Another timestamp is another wheel: the time really is in the bytes. */
    s.spec.source_date_epoch = EPOCH_2023_11_14 + 86400;
    free(write_ok(&s.spec));
    free(bytes2);
    bytes2 = read_all(first, &size2);
    ck_assert_msg(size1 != size2 || memcmp(bytes1, bytes2, size1) != 0, "the epoch does not reach the wheel");
    free(bytes1);
    free(bytes2);
    free(first);
    free(second);
    remove_tree(s.dir);
    remove_tree(other);
}
END_TEST

START_TEST(layout_modes_and_metadata)
{
    sample s;
    sample_init(&s);
    char *path = write_ok(&s.spec);
    char want[1024];
    snprintf(want, sizeof want, "%s/msda-0.1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
             s.dir);
    ck_assert_str_eq(path, want);
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    ck_assert_uint_eq(sb.st_mode & 07777, 0644);

    listed_member m[16];
    size_t n = list_members(path, m, 16);
    const char *order[] = { "msda/__init__.py", "msda/bin/msda-tool", "msda/libmsda.so", "msda/ops.py",
                            "msda-0.1.0.dist-info/METADATA", "msda-0.1.0.dist-info/WHEEL",
                            "msda-0.1.0.dist-info/RECORD" };
    ck_assert_uint_eq(n, 7);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(m[i].name, order[i]);
        ck_assert_uint_eq(m[i].perm, strcmp(m[i].name, "msda/bin/msda-tool") == 0 ? 0755 : 0644);
        ck_assert_int_eq(m[i].mtime, EPOCH_2023_11_14);
    }
    ck_assert_str_eq(m[4].text, "Metadata-Version: 2.1\nName: msda\nVersion: 0.1.0\n"
                                "Summary: Multi-Scale Deformable Attention\nRequires-Python: >=3.8\n"
                                "Requires-Dist: numpy\nRequires-Dist: torch>=1.8; extra == \"torch\"\n");
    char wheel[512];
    snprintf(wheel, sizeof wheel,
             "Wheel-Version: 1.0\nGenerator: msda-doctor %s\nRoot-Is-Purelib: false\n"
             "Tag: py3-none-manylinux_2_17_x86_64\nTag: py3-none-manylinux2014_x86_64\n",
             MSDA_DOCTOR_VERSION);
    ck_assert_str_eq(m[5].text, wheel);
    ck_assert_msg(strncmp(m[6].text, "msda/__init__.py,sha256=", 24) == 0, "RECORD: %s", m[6].text);
    ck_assert_ptr_nonnull(strstr(m[6].text, ",32\nmsda/bin/msda-tool,sha256="));
    ck_assert_ptr_nonnull(strstr(m[6].text, "msda/libmsda.so,sha256="));
    ck_assert_ptr_nonnull(strstr(m[6].text, ",5000\n"));
    size_t len = strlen(m[6].text);
    ck_assert_str_eq(m[6].text + len - strlen("msda-0.1.0.dist-info/RECORD,,\n"),
                     "msda-0.1.0.dist-info/RECORD,,\n");

    md_error err;
    md_error_clear(&err);
    ck_assert_msg(md_wheel_verify_record(path, &err) == MD_OK, "verify: %s", err.message);
    free(path);
    remove_tree(s.dir);
}
END_TEST

START_TEST(epoch_defaults_and_floor)
{
    sample s;
    sample_init(&s);
    listed_member m[16];
    s.spec.source_date_epoch = 0;
    char *path = write_ok(&s.spec);
    list_members(path, m, 16);
    ck_assert_int_eq(m[0].mtime, MD_WHEEL_DEFAULT_EPOCH);
    free(path);
    s.spec.source_date_epoch = 86400; /* 1970-01-02: zip cannot say it */
    path = write_ok(&s.spec);
    list_members(path, m, 16);
    ck_assert_int_eq(m[0].mtime, MD_WHEEL_MIN_EPOCH);
    free(path);
    remove_tree(s.dir);
}
END_TEST

/* Python's own reading of the wheel: every RECORD hash and size, and zipfile's CRC check. */
static const char PY_CHECK[] =
    "import base64, csv, hashlib, io, sys, zipfile\n"
    "z = zipfile.ZipFile(sys.argv[1])\n"
    "assert z.testzip() is None\n"
    "names = [i.filename for i in z.infolist()]\n"
    "rec = [n for n in names if n.endswith('.dist-info/RECORD')]\n"
    "assert len(rec) == 1 and names[-1] == rec[0], names\n"
    "rows = list(csv.reader(io.TextIOWrapper(z.open(rec[0]), 'utf-8')))\n"
    "assert sorted(r[0] for r in rows) == sorted(names), (rows, names)\n"
    "for path, digest, size in rows:\n"
    "    if path == rec[0]:\n"
    "        assert digest == '' and size == '', (digest, size)\n"
    "        continue\n"
    "    data = z.read(path)\n"
    "    want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()\n"
    "    assert digest == 'sha256=' + want and int(size) == len(data), path\n"
    "for i in z.infolist():\n"
    "    assert i.compress_type in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED), i\n"
    "    assert (i.external_attr >> 16) & 0o777 in (0o644, 0o755), i\n";

START_TEST(python_agrees_with_record)
{
    sample s;
    sample_init(&s);
    char *path = write_ok(&s.spec);
    char *argv[] = { "python3", "-c", (char *)PY_CHECK, path, NULL };
    pid_t pid;
    int rc = posix_spawnp(&pid, "python3", NULL, NULL, argv, environ);
    if (rc != 0) {
        free(path);
        remove_tree(s.dir);
        ck_abort_msg("cannot run python3: %s", strerror(rc));
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "python3 rejected %s", path);
    free(path);
    remove_tree(s.dir);
}
END_TEST

/* Flips one byte inside the first member's compressed data. */
START_TEST(corrupt_member_fails_verification)
{
    sample s;
    sample_init(&s);
    char *path = write_ok(&s.spec);
    size_t size;
    unsigned char *bytes = read_all(path, &size);
    ck_assert_uint_gt(size, 64);
    size_t name_len = bytes[26] | (size_t)bytes[27] << 8, extra_len = bytes[28] | (size_t)bytes[29] << 8;
    size_t data_at = 30 + name_len + extra_len;
    ck_assert_uint_lt(data_at + 4, size);
    bytes[data_at + 3] ^= 0x55;
    write_all(path, bytes, size);
    md_error err;
    md_error_clear(&err);
    ck_assert_int_eq(md_wheel_verify_record(path, &err), MD_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, "msda/__init__.py") != NULL, "message: %s", err.message);
    free(bytes);
    free(path);
    remove_tree(s.dir);
}
END_TEST

/* A zip made without the writer, to give the checker RECORDs that lie. */
static void write_zip(const char *path, const char *const *names, const char *const *texts, size_t n)
{
    struct archive *ar = archive_write_new();
    archive_write_set_format_zip(ar);
    ck_assert_int_eq(archive_write_open_filename(ar, path), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)strlen(texts[i]));
        ck_assert_int_eq(archive_write_header(ar, e), ARCHIVE_OK);
        ck_assert_int_eq(archive_write_data(ar, texts[i], strlen(texts[i])), (la_ssize_t)strlen(texts[i]));
        archive_entry_free(e);
    }
    ck_assert_int_eq(archive_write_close(ar), ARCHIVE_OK);
    archive_write_free(ar);
}

/* sha256("hello\n") in RECORD's spelling. */
#define HELLO_SHA "sha256=WJG1tSLV3whtD_CxEPvZ0hu0_HFjrzTQgoai6Eb2vgM"

static void expect_record_failure(const char *dir, const char *record, const char *needle)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/x-1-py3-none-any.whl", dir);
    const char *names[] = { "x/a.txt", "x-1.dist-info/RECORD" };
    const char *texts[] = { "hello\n", record };
    write_zip(path, names, texts, 2);
    md_error err;
    md_error_clear(&err);
    md_status st = md_wheel_verify_record(path, &err);
    if (!needle) {
        ck_assert_msg(st == MD_OK, "RECORD '%s' rejected: %s", record, err.message);
        return;
    }
    ck_assert_msg(st == MD_ERR_FORMAT, "RECORD '%s' accepted", record);
    ck_assert_msg(strstr(err.message, needle) != NULL, "RECORD '%s': message '%s' lacks '%s'", record,
                  err.message, needle);
}

START_TEST(lying_records_rejected)
{
    char dir[512];
    make_temp_dir(dir, sizeof dir);
    expect_record_failure(dir, "x/a.txt," HELLO_SHA ",6\nx-1.dist-info/RECORD,,\n", NULL);
    expect_record_failure(dir, "\"x/a.txt\"," HELLO_SHA ",6\r\nx-1.dist-info/RECORD,,\r\n", NULL);
    expect_record_failure(
        dir, "x/a.txt,sha256=WJG1tSLV3whtD_CxEPvZ0hu0_HFjrzTQgoai6Eb2vgX,6\nx-1.dist-info/RECORD,,\n",
        "'x/a.txt' has sha256 WJG1tSLV3whtD_CxEPvZ0hu0_HFjrzTQgoai6Eb2vgM but RECORD says "
        "WJG1tSLV3whtD_CxEPvZ0hu0_HFjrzTQgoai6Eb2vgX");
    expect_record_failure(dir, "x/a.txt," HELLO_SHA ",7\nx-1.dist-info/RECORD,,\n", "RECORD says 7");
    expect_record_failure(dir, "x-1.dist-info/RECORD,,\n", "'x/a.txt' is not listed");
    expect_record_failure(dir, "x/a.txt," HELLO_SHA ",6\nx/b.txt," HELLO_SHA ",6\nx-1.dist-info/RECORD,,\n",
                          "'x/b.txt', which the wheel does not contain");
    expect_record_failure(dir, "x/a.txt," HELLO_SHA ",6\nx/a.txt," HELLO_SHA ",6\nx-1.dist-info/RECORD,,\n",
                          "twice");
    expect_record_failure(dir, "x/a.txt," HELLO_SHA ",6\nx-1.dist-info/RECORD,sha256=abc,5\n", "own row");
    expect_record_failure(dir, "x/a.txt,md5=abc,6\nx-1.dist-info/RECORD,,\n", "no sha256");
    expect_record_failure(dir, "x/a.txt," HELLO_SHA "\nx-1.dist-info/RECORD,,\n", "three CSV fields");
    expect_record_failure(dir, "x/a.txt," HELLO_SHA ",6x\nx-1.dist-info/RECORD,,\n", "invalid size");

    md_error err;
    char path[1024];
    snprintf(path, sizeof path, "%s/norecord.whl", dir);
    const char *names[] = { "x/a.txt" };
    const char *texts[] = { "hello\n" };
    write_zip(path, names, texts, 1);
    ck_assert_int_eq(md_wheel_verify_record(path, &err), MD_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.message, "no .dist-info/RECORD"));
    snprintf(path, sizeof path, "%s/notzip.whl", dir);
    write_all(path, "not a zip at all, just text", 27);
    ck_assert_int_eq(md_wheel_verify_record(path, &err), MD_ERR_FORMAT);
    snprintf(path, sizeof path, "%s/missing.whl", dir);
    ck_assert_int_eq(md_wheel_verify_record(path, &err), MD_ERR_IO);
    remove_tree(dir);
}
END_TEST

/* What a spec may carry at the edges: a member path with a space and a '~' (the first and last
 * printable characters), a name with 'z', 'Z' and '9', no summary (then METADATA has no Summary
 * line), and a .dist-info file given before the package's files (it still comes after them, as
 * the generated ones do). */
START_TEST(edge_specs_accepted)
{
    sample s;
    sample_init(&s);
    md_wheel_file files[2] = { { .path = "zZ9-0.1.0.dist-info/LICENSE", .data = "MIT\n", .size = 4 },
                               { .path = "msda/a b~.py", .data = "x", .size = 1 } };
    md_wheel_spec spec = s.spec;
    spec.dist = "zZ9";
    spec.summary = NULL;
    spec.files = files;
    spec.n_files = 2;
    char *path = write_ok(&spec);
    listed_member m[8];
    size_t n = list_members(path, m, 8);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(m[0].name, "msda/a b~.py");
    ck_assert_str_eq(m[1].name, "zZ9-0.1.0.dist-info/LICENSE");
    ck_assert_str_eq(m[2].name, "zZ9-0.1.0.dist-info/METADATA");
    ck_assert_str_eq(m[2].text, "Metadata-Version: 2.1\nName: zZ9\nVersion: 0.1.0\nRequires-Python: >=3.8\n"
                                "Requires-Dist: numpy\nRequires-Dist: torch>=1.8; extra == \"torch\"\n");
    free(path);
    remove_tree(s.dir);
}
END_TEST

/* A wheel with two RECORD files (in two .dist-info folders) is refused, naming both. */
START_TEST(two_records_rejected)
{
    char dir[512], path[1024];
    make_temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/x-1-py3-none-any.whl", dir);
    const char *names[] = { "x/a.txt", "x-1.dist-info/RECORD", "y-1.dist-info/RECORD" };
    const char *record = "x/a.txt," HELLO_SHA ",6\nx-1.dist-info/RECORD,,\n";
    const char *texts[] = { "hello\n", record, record };
    write_zip(path, names, texts, 3);
    md_error err;
    md_error_clear(&err);
    ck_assert_int_eq(md_wheel_verify_record(path, &err), MD_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, "two RECORD files: 'x-1.dist-info/RECORD' and 'y-1.dist-info/RECORD'"),
                  "message: %s", err.message);
    remove_tree(dir);
}
END_TEST

START_TEST(failed_write_leaves_nothing)
{
    sample s;
    sample_init(&s);
    md_error err;
    char *path = (char *)"untouched";
    /* The source file is the only entry in the directory before each write. */
    ck_assert_uint_eq(count_entries(s.dir), 1);

    char missing[700];
    snprintf(missing, sizeof missing, "%s/no-such-file.so", s.dir);
    s.files[1].source_path = missing;
    ck_assert_int_eq(md_wheel_write(&s.spec, &path, &err), MD_ERR_IO);
    ck_assert_ptr_null(path);
    ck_assert_msg(strstr(err.message, "no-such-file.so") != NULL, "message: %s", err.message);
    ck_assert_uint_eq(count_entries(s.dir), 1);

    /* A good wheel survives a failed rewrite of the same name. */
    s.files[1].source_path = s.source;
    char *good = write_ok(&s.spec);
    size_t good_size, after_size;
    unsigned char *good_bytes = read_all(good, &good_size);
    s.files[1].source_path = missing;
    ck_assert_int_eq(md_wheel_write(&s.spec, NULL, &err), MD_ERR_IO);
    unsigned char *after = read_all(good, &after_size);
    ck_assert_uint_eq(good_size, after_size);
    ck_assert(memcmp(good_bytes, after, good_size) == 0);
    ck_assert_uint_eq(count_entries(s.dir), 2);
    free(good_bytes);
    free(after);
    ck_assert_int_eq(unlink(good), 0);
    free(good);
    s.files[1].source_path = s.source;

    /* A directory as a source fails while the temporary file exists. */
    s.files[1].source_path = s.dir;
    ck_assert_int_eq(md_wheel_write(&s.spec, NULL, &err), MD_ERR_IO);
    ck_assert_uint_eq(count_entries(s.dir), 1);
    s.files[1].source_path = s.source;

    /* An output directory that does not exist, or cannot be written (not as root, who can). */
    char nodir[700];
    snprintf(nodir, sizeof nodir, "%s/absent", s.dir);
    s.spec.output_dir = nodir;
    ck_assert_int_eq(md_wheel_write(&s.spec, NULL, &err), MD_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, "absent"));
    if (geteuid() != 0) {
        char ro[700];
        snprintf(ro, sizeof ro, "%s/ro", s.dir);
        ck_assert_int_eq(mkdir(ro, 0555), 0);
        s.spec.output_dir = ro;
        ck_assert_int_eq(md_wheel_write(&s.spec, NULL, &err), MD_ERR_IO);
        ck_assert_uint_eq(count_entries(ro), 0);
        chmod(ro, 0755);
    }
    remove_tree(s.dir);
}
END_TEST

START_TEST(bad_specs_rejected)
{
    sample s;
    sample_init(&s);
    md_error err;
    md_wheel_spec bad;
    const char *dists[] = { "-msda", "msda-", "ms da", "", "ms/da" };
    for (size_t i = 0; i < sizeof dists / sizeof *dists; i++) {
        bad = s.spec;
        bad.dist = dists[i];
        ck_assert_msg(md_wheel_write(&bad, NULL, &err) == MD_ERR_ARGUMENT, "dist '%s' accepted", dists[i]);
    }
    const char *versions[] = { "1-2", "", "1 2", "1/2" };
    for (size_t i = 0; i < sizeof versions / sizeof *versions; i++) {
        bad = s.spec;
        bad.version = versions[i];
        ck_assert_msg(md_wheel_write(&bad, NULL, &err) == MD_ERR_ARGUMENT, "version '%s' accepted",
                      versions[i]);
    }
    const char *tags[] = { "", "a..b", ".a", "a.", "a-b", "a b" };
    for (size_t i = 0; i < sizeof tags / sizeof *tags; i++) {
        bad = s.spec;
        bad.platform_tag = tags[i];
        ck_assert_msg(md_wheel_write(&bad, NULL, &err) == MD_ERR_ARGUMENT, "tag '%s' accepted", tags[i]);
    }
    bad = s.spec;
    bad.summary = "two\nlines";
    ck_assert_int_eq(md_wheel_write(&bad, NULL, &err), MD_ERR_ARGUMENT);
    const char *paths[] = { "/abs", "a/../b", "a//b", "a/", "./a", "a,b", "a\"b", "a\\b", "caf\xc3\xa9",
                            "msda-0.1.0.dist-info/RECORD", "msda-0.1.0.dist-info/WHEEL", "msda/ops.py" };
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        md_wheel_file files[2] = { s.files[0], { .path = paths[i], .data = "x", .size = 1 } };
        bad = s.spec;
        bad.files = files;
        bad.n_files = 2;
        ck_assert_msg(md_wheel_write(&bad, NULL, &err) == MD_ERR_ARGUMENT, "member '%s' accepted", paths[i]);
    }
    ck_assert_uint_eq(count_entries(s.dir), 1);
    /* Extra .dist-info files are allowed and sort with the generated ones, before RECORD. */
    md_wheel_file files[2] = { s.files[0],
                               { .path = "msda-0.1.0.dist-info/LICENSE", .data = "MIT\n", .size = 4 } };
    bad = s.spec;
    bad.files = files;
    bad.n_files = 2;
    char *path = write_ok(&bad);
    listed_member m[8];
    size_t n = list_members(path, m, 8);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(m[0].name, "msda/ops.py");
    ck_assert_str_eq(m[1].name, "msda-0.1.0.dist-info/LICENSE");
    ck_assert_str_eq(m[4].name, "msda-0.1.0.dist-info/RECORD");
    ck_assert_int_eq(md_wheel_verify_record(path, &err), MD_OK);
    free(path);
    remove_tree(s.dir);
}
END_TEST

Suite *suite_wheel(void)
{
    Suite *s = suite_create("wheel");
    TCase *tc = tcase_create("wheel");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, platform_tags);
    tcase_add_test(tc, dist_names_normalised);
    tcase_add_test(tc, product_wheel_name);
    tcase_add_test(tc, same_inputs_same_bytes);
    tcase_add_test(tc, layout_modes_and_metadata);
    tcase_add_test(tc, epoch_defaults_and_floor);
    tcase_add_test(tc, python_agrees_with_record);
    tcase_add_test(tc, corrupt_member_fails_verification);
    tcase_add_test(tc, lying_records_rejected);
    tcase_add_test(tc, edge_specs_accepted);
    tcase_add_test(tc, two_records_rejected);
    tcase_add_test(tc, failed_write_leaves_nothing);
    tcase_add_test(tc, bad_specs_rejected);
    suite_add_tcase(s, tc);
    return s;
}
