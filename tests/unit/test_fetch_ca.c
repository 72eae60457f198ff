/* md_ca_store_find (src/lib/fetch/fetch_ca.h): the variables first, then the distributions'
 * places under a made-up root, and the error that names the variables when there is none. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fetch/fetch_ca.h"
#include "unit.h"

static char root[PATH_MAX];

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/msda-ca-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(root));
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");
    unsetenv("CURL_CA_BUNDLE");
}

/* ROOT/REL as an empty file (or a folder when it ends in '/'), its parents made. */
static void make(const char *rel)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        ck_assert(mkdir(path, 0755) == 0 || access(path, F_OK) == 0);
        *p = '/';
    }
    if (path[strlen(path) - 1] != '/') {
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
    }
}

static void expect(const char *file, const char *dir, const char *from)
{
    md_ca_store store;
    md_error err;
    ck_assert_int_eq(md_ca_store_find(root, &store, &err), MD_OK);
    char want[PATH_MAX];
    snprintf(want, sizeof want, "%s%s", file ? root : "", file ? file : "");
    ck_assert_str_eq(store.file, want);
    snprintf(want, sizeof want, "%s%s", dir ? root : "", dir ? dir : "");
    ck_assert_str_eq(store.dir, want);
    ck_assert_str_eq(store.from, from);
}

START_TEST(none_anywhere_names_the_variables)
{
    md_ca_store store;
    md_error err;
    ck_assert_int_eq(md_ca_store_find(root, &store, &err), MD_ERR_NETWORK);
    ck_assert_ptr_nonnull(strstr(err.message, "no CA certificates"));
    ck_assert_ptr_nonnull(strstr(err.message, "SSL_CERT_FILE"));
    ck_assert_ptr_nonnull(strstr(err.message, "SSL_CERT_DIR"));
}
END_TEST

START_TEST(debian_bundle_and_folder)
{
    make("/etc/ssl/certs/ca-certificates.crt");
    make("/etc/pki/tls/certs/ca-bundle.crt");
    expect("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs", "system");
}
END_TEST

START_TEST(rhel_bundle)
{
    make("/etc/pki/tls/certs/ca-bundle.crt");
    expect("/etc/pki/tls/certs/ca-bundle.crt", "/etc/pki/tls/certs", "system");
}
END_TEST

START_TEST(suse_bundle)
{
    make("/var/lib/ca-certificates/ca-bundle.pem");
    expect("/var/lib/ca-certificates/ca-bundle.pem", NULL, "system");
}
END_TEST

START_TEST(alpine_cert_pem)
{
    make("/etc/ssl/cert.pem");
    expect("/etc/ssl/cert.pem", NULL, "system");
}
END_TEST

START_TEST(a_folder_without_a_bundle)
{
    make("/etc/ssl/certs/");
    expect(NULL, "/etc/ssl/certs", "system");
}
END_TEST

START_TEST(a_bundle_that_is_a_folder_does_not_count)
{
    make("/etc/ssl/cert.pem/");
    md_ca_store store;
    md_error err;
    ck_assert_int_eq(md_ca_store_find(root, &store, &err), MD_ERR_NETWORK);
}
END_TEST

START_TEST(variables_win_over_the_system)
{
    make("/etc/ssl/certs/ca-certificates.crt");
    make("/mine/bundle.pem");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/mine/bundle.pem", root);
    setenv("CURL_CA_BUNDLE", path, 1);
    expect("/mine/bundle.pem", NULL, "CURL_CA_BUNDLE");
    snprintf(path, sizeof path, "%s/mine", root);
    setenv("SSL_CERT_DIR", path, 1);
    expect(NULL, "/mine", "SSL_CERT_DIR"); /* OpenSSL's variables before curl's */
    snprintf(path, sizeof path, "%s/mine/bundle.pem", root);
    setenv("SSL_CERT_FILE", path, 1);
    expect("/mine/bundle.pem", "/mine", "SSL_CERT_DIR");
}
END_TEST

START_TEST(a_variable_naming_nothing_is_an_error)
{
    make("/etc/ssl/certs/ca-certificates.crt");
    setenv("SSL_CERT_FILE", "/nonexistent/bundle.pem", 1);
    md_ca_store store;
    md_error err;
    ck_assert_int_eq(md_ca_store_find(root, &store, &err), MD_ERR_NETWORK);
    ck_assert_ptr_nonnull(strstr(err.message, "SSL_CERT_FILE is '/nonexistent/bundle.pem'"));
}
END_TEST

Suite *suite_fetch_ca(void)
{
    Suite *s = suite_create("fetch_ca");
    TCase *tc = tcase_create("store");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, none_anywhere_names_the_variables);
    tcase_add_test(tc, debian_bundle_and_folder);
    tcase_add_test(tc, rhel_bundle);
    tcase_add_test(tc, suse_bundle);
    tcase_add_test(tc, alpine_cert_pem);
    tcase_add_test(tc, a_folder_without_a_bundle);
    tcase_add_test(tc, a_bundle_that_is_a_folder_does_not_count);
    tcase_add_test(tc, variables_win_over_the_system);
    tcase_add_test(tc, a_variable_naming_nothing_is_an_error);
    suite_add_tcase(s, tc);
    return s;
}
