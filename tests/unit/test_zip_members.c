/* The zip member reader on archives made here with libarchive's writer: members listed and
 * streamed, a missing member, and corrupt or truncated archives giving errors, not crashes. */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "unit.h"
#include "binary/zip_members.h"

enum { BIG = 300000 }; /* several of libarchive's blocks */

static char dir[64], zip_path[128];
static unsigned char *big;

static void add(struct archive *ar, const char *name, mode_t type, const void *data, size_t size)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    ck_assert_int_eq(archive_write_header(ar, e), ARCHIVE_OK);
    if (size)
        ck_assert_int_eq(archive_write_data(ar, data, size), (la_ssize_t)size);
    archive_entry_free(e);
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/md-zip-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(zip_path, sizeof zip_path, "%s/t.whl", dir);
    big = malloc(BIG);
    ck_assert_ptr_nonnull(big);
    uint32_t x = 12345;
    for (size_t i = 0; i < BIG; i++) { /* incompressible, so the archive is large too */
        x = x * 1103515245u + 12345u;
        big[i] = (unsigned char)(x >> 23);
    }
    struct archive *ar = archive_write_new();
    archive_write_set_format_zip(ar);
    archive_write_set_options(ar, "zip:compression=deflate");
    ck_assert_int_eq(archive_write_open_filename(ar, zip_path), ARCHIVE_OK);
    add(ar, "pkg/", AE_IFDIR, NULL, 0);
    add(ar, "pkg/__init__.py", AE_IFREG, "print('hi')\n", 12);
    add(ar, "pkg/lib.so", AE_IFREG, big, BIG);
    add(ar, "pkg-1.0.dist-info/RECORD", AE_IFREG, "", 0);
    ck_assert_int_eq(archive_write_close(ar), ARCHIVE_OK);
    archive_write_free(ar);
}

static void teardown(void)
{
    char path[128];
    const char *names[] = { "t.whl", "cut.whl", "out" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    free(big);
}

typedef struct {
    unsigned char *data;
    size_t len, cap;
} collected;

static md_status collect(const void *data, size_t len, void *ctx, md_error *err)
{
    (void)err;
    collected *c = ctx;
    if (c->len + len > c->cap)
        return MD_ERR_NOMEM;
    memcpy(c->data + c->len, data, len);
    c->len += len;
    return MD_OK;
}

static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*size ? *size : 1);
    ck_assert_uint_eq(fread(b, 1, *size, f), *size);
    fclose(f);
    return b;
}

static void write_file(const char *path, const unsigned char *b, size_t size)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, size, f), size);
    fclose(f);
}

START_TEST(members_are_listed_in_order)
{
    md_zip *zip;
    md_error err;
    ck_assert_int_eq(md_zip_open(zip_path, &zip, &err), MD_OK);
    const char *names[] = { "pkg/", "pkg/__init__.py", "pkg/lib.so", "pkg-1.0.dist-info/RECORD" };
    const md_zip_type types[] = { MD_ZIP_DIRECTORY, MD_ZIP_FILE, MD_ZIP_FILE, MD_ZIP_FILE };
    const uint64_t sizes[] = { 0, 12, BIG, 0 };
    md_zip_member m;
    bool end = false;
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(md_zip_next(zip, &m, &end, &err), MD_OK);
        ck_assert(!end);
        ck_assert_str_eq(m.name, names[i]);
        ck_assert_int_eq(m.type, types[i]);
        ck_assert_uint_eq(m.size, sizes[i]);
    }
    ck_assert_int_eq(md_zip_next(zip, &m, &end, &err), MD_OK);
    ck_assert(end);
    md_zip_close(zip);
}
END_TEST

START_TEST(a_member_is_streamed_whole)
{
    md_zip *zip;
    md_error err;
    ck_assert_int_eq(md_zip_open(zip_path, &zip, &err), MD_OK);
    md_zip_member m;
    bool end = false;
    collected c = { .data = malloc(BIG), .cap = BIG };
    uint64_t size = 0;
    while (md_zip_next(zip, &m, &end, &err) == MD_OK && !end)
        if (strcmp(m.name, "pkg/lib.so") == 0)
            ck_assert_int_eq(md_zip_read(zip, collect, &c, &size, &err), MD_OK);
    ck_assert(end);
    ck_assert_uint_eq(size, BIG);
    ck_assert_uint_eq(c.len, BIG);
    ck_assert(memcmp(c.data, big, BIG) == 0);
    free(c.data);
    md_zip_close(zip);
}
END_TEST

START_TEST(a_member_is_extracted_into_a_file)
{
    char out[128];
    snprintf(out, sizeof out, "%s/out", dir);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    md_error err;
    ck_assert_int_eq(md_zip_extract(zip_path, "pkg/lib.so", fd, &err), MD_OK);
    close(fd);
    size_t size;
    unsigned char *got = read_file(out, &size);
    ck_assert_uint_eq(size, BIG);
    ck_assert(memcmp(got, big, BIG) == 0);
    free(got);
}
END_TEST

START_TEST(a_missing_member_names_the_archive_and_the_member)
{
    md_error err;
    int fd = open("/dev/null", O_WRONLY);
    ck_assert_int_eq(md_zip_extract(zip_path, "pkg/missing.so", fd, &err), MD_ERR_FORMAT);
    close(fd);
    ck_assert_msg(strstr(err.message, zip_path) && strstr(err.message, "pkg/missing.so"), "message: %s", err.message);
    /* a directory is not a member to extract */
    fd = open("/dev/null", O_WRONLY);
    ck_assert_int_eq(md_zip_extract(zip_path, "pkg/", fd, &err), MD_ERR_FORMAT);
    close(fd);
}
END_TEST

START_TEST(no_file_or_not_a_zip)
{
    md_zip *zip = (md_zip *)&zip;
    md_error err;
    ck_assert_int_eq(md_zip_open("/nonexistent/x.whl", &zip, &err), MD_ERR_IO);
    ck_assert_ptr_null(zip);
    ck_assert_msg(strstr(err.message, "/nonexistent/x.whl"), "message: %s", err.message);
    write_file(zip_path, (const unsigned char *)"not a zip at all\n", 17);
    ck_assert_int_eq(md_zip_open(zip_path, &zip, &err), MD_ERR_FORMAT);
    ck_assert_ptr_null(zip);
    ck_assert_msg(strstr(err.message, zip_path), "message: %s", err.message);
    md_zip_close(NULL);
}
END_TEST

/* Reads every member to the end; returns the first error, MD_OK when the archive read cleanly. */
static md_status walk(const char *path, md_error *err)
{
    md_zip *zip;
    md_status st = md_zip_open(path, &zip, err);
    if (st != MD_OK)
        return st;
    md_zip_member m;
    bool end = false;
    collected c = { .data = malloc(BIG), .cap = BIG };
    while ((st = md_zip_next(zip, &m, &end, err)) == MD_OK && !end) {
        c.len = 0;
        if ((st = md_zip_read(zip, collect, &c, NULL, err)) != MD_OK)
            break;
        if (strcmp(m.name, "pkg/lib.so") == 0)
            ck_assert(c.len == BIG && memcmp(c.data, big, BIG) == 0);
    }
    free(c.data);
    md_zip_close(zip);
    return st;
}

/* A zip comment may hold the end record's signature: only the record whose comment reaches the
 * file's end is the real one, so a fake one inside the comment, declaring 9 entries, changes
 * nothing. */
START_TEST(an_end_record_signature_inside_the_comment_is_not_the_end_record)
{
    size_t size;
    unsigned char *whole = read_file(zip_path, &size);
    unsigned char comment[40] = { 'P', 'K', 5, 6 };
    comment[10] = 9; /* the fake record's entry count */
    ck_assert_uint_eq(whole[size - 22], 'P');
    whole[size - 2] = sizeof comment; /* the real record's comment length */
    unsigned char *longer = malloc(size + sizeof comment);
    ck_assert_ptr_nonnull(longer);
    memcpy(longer, whole, size);
    memcpy(longer + size, comment, sizeof comment);
    write_file(zip_path, longer, size + sizeof comment);
    md_error err;
    md_error_clear(&err);
    md_status st = walk(zip_path, &err);
    ck_assert_msg(st == MD_OK, "%d %s", st, err.message);
    free(longer);
    free(whole);
}
END_TEST

START_TEST(truncated_archives_fail_cleanly)
{
    size_t size;
    unsigned char *whole = read_file(zip_path, &size);
    char cut[128];
    snprintf(cut, sizeof cut, "%s/cut.whl", dir);
    size_t failures = 0, tried = 0;
    for (size_t len = 0; len < size; len += len < 256 ? 7 : 4099) {
        write_file(cut, whole, len);
        md_error err;
        md_error_clear(&err);
        md_status st = walk(cut, &err);
        tried++;
        if (st != MD_OK) {
            failures++;
            ck_assert_msg(st == MD_ERR_FORMAT, "cut at %zu: %d %s", len, st, err.message);
            ck_assert_msg(strstr(err.message, cut), "cut at %zu: message '%s'", len, err.message);
        }
    }
    /* every cut before the last member's data ends loses data, so it must be seen */
    ck_assert_uint_ge(failures, tried - 2);
    free(whole);
}
END_TEST

START_TEST(a_corrupt_member_is_named)
{
    size_t size;
    unsigned char *bytes = read_file(zip_path, &size);
    /* the third local header is pkg/lib.so's; flip a byte well inside its deflated data */
    unsigned char *p = bytes;
    for (int seen = 0; p + 4 < bytes + size; p++)
        if (memcmp(p, "PK\003\004", 4) == 0 && ++seen == 3)
            break;
    ck_assert_uint_lt((size_t)(p - bytes) + 1000, size);
    p[1000] ^= 0x55;
    write_file(zip_path, bytes, size);
    md_error err;
    ck_assert_int_eq(walk(zip_path, &err), MD_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, "pkg/lib.so") && strstr(err.message, zip_path), "message: %s", err.message);
    free(bytes);
}
END_TEST

START_TEST(an_open_fd_is_read_from_its_start_and_left_open)
{
    int fd = open(zip_path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(lseek(fd, 100, SEEK_SET), 100);
    md_zip *zip;
    md_error err;
    ck_assert_int_eq(md_zip_open_fd(fd, "named.whl", &zip, &err), MD_OK);
    md_zip_member m;
    bool end = false;
    ck_assert_int_eq(md_zip_next(zip, &m, &end, &err), MD_OK);
    ck_assert_str_eq(m.name, "pkg/");
    md_zip_close(zip);
    ck_assert_int_ne(fcntl(fd, F_GETFD), -1);
    close(fd);
}
END_TEST

Suite *suite_zip_members(void)
{
    Suite *s = suite_create("zip_members");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, members_are_listed_in_order);
    tcase_add_test(tc, an_end_record_signature_inside_the_comment_is_not_the_end_record);
    tcase_add_test(tc, a_member_is_streamed_whole);
    tcase_add_test(tc, a_member_is_extracted_into_a_file);
    tcase_add_test(tc, a_missing_member_names_the_archive_and_the_member);
    tcase_add_test(tc, no_file_or_not_a_zip);
    tcase_add_test(tc, truncated_archives_fail_cleanly);
    tcase_add_test(tc, a_corrupt_member_is_named);
    tcase_add_test(tc, an_open_fd_is_read_from_its_start_and_left_open);
    suite_add_tcase(s, tc);
    return s;
}
