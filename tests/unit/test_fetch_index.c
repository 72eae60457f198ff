#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fetch/fetch_cache.h"
#include "fetch/fetch_index.h"
#include "fetch/pip_config.h"
#include "unit.h"

/* A page of wheels named NAMES (the versions parsed as md_index_read would). */
static md_index_page page_of(const char *const *names, size_t n)
{
    md_index_page page = { .files = calloc(n, sizeof(md_index_file)), .n_files = n };
    ck_assert_ptr_nonnull(page.files);
    for (size_t i = 0; i < n; i++) {
        snprintf(page.files[i].filename, sizeof page.files[i].filename, "%s", names[i]);
        const char *dash = strchr(names[i], '-');
        snprintf(page.files[i].version, sizeof page.files[i].version, "%.*s", (int)strcspn(dash + 1, "-"), dash + 1);
    }
    return page;
}

START_TEST(pick_takes_the_newest_final_release_of_major_minor_for_the_machine)
{
    const char *names[] = {
        "nvidia_nvvm-13.0.48-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
        "nvidia_nvvm-13.0.100-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        "nvidia_nvvm-13.0.88-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
        "nvidia_nvvm-13.0.9-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
        "nvidia_nvvm-13.0.300rc1-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
        "nvidia_nvvm-13.5.37-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl",
        "nvidia_nvvm-13.0.99-py3-none-win_amd64.whl",
        "nvidia_nvvm_cu12-13.0.500-py3-none-manylinux2010_x86_64.whl",
    };
    md_index_page page = page_of(names, sizeof names / sizeof names[0]);
    /* 88 > 9 as numbers; the rc, another machine, Windows and another project are passed over */
    const md_index_file *f = md_index_pick(&page, "nvidia-nvvm", "x86_64", 13, 0, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(f->version, "13.0.88");
    /* a pin the page has wins over the newest; one it lacks falls back to the newest */
    ck_assert_str_eq(md_index_pick(&page, "nvidia-nvvm", "x86_64", 13, 0, "13.0.48")->version, "13.0.48");
    ck_assert_str_eq(md_index_pick(&page, "nvidia-nvvm", "x86_64", 13, 0, "13.0.77")->version, "13.0.88");
    ck_assert_str_eq(md_index_pick(&page, "nvidia-nvvm", "aarch64", 13, 0, NULL)->version, "13.0.100");
    /* names compare as PEP 503 normalises them */
    ck_assert_ptr_nonnull(md_index_pick(&page, "NVIDIA_nvvm", "x86_64", 13, 0, NULL));
    ck_assert_ptr_null(md_index_pick(&page, "nvidia-nvvm", "x86_64", 13, 1, NULL));
    ck_assert_ptr_null(md_index_pick(&page, "nvidia-nvvm", "ppc64le", 13, 0, NULL));
    ck_assert(md_index_has_release(&page, "nvidia-nvvm", 13, 5));
    ck_assert(!md_index_has_release(&page, "nvidia-nvvm", 12, 9));
    md_index_page_free(&page);
}
END_TEST

START_TEST(pick_compares_releases_of_different_lengths_as_zero_padded)
{
    /* 12.4 is 12.4.0, older than 12.4.1, whatever numbers the wheels read before it (another
     * machine's 12.4.99) left behind its two parts; and 12.4.1.1 is newer than 12.4.1 */
    const char *names[] = {
        "nvidia_cuda_nvcc_cu12-12.4.99-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        "nvidia_cuda_nvcc_cu12-12.4.1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "nvidia_cuda_nvcc_cu12-12.4.99-py3-none-manylinux2014_aarch64.manylinux_2_17_aarch64.whl",
        "nvidia_cuda_nvcc_cu12-12.4-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    };
    md_index_page page = page_of(names, sizeof names / sizeof names[0]);
    ck_assert_str_eq(md_index_pick(&page, "nvidia-cuda-nvcc-cu12", "x86_64", 12, 4, NULL)->version, "12.4.1");
    md_index_page_free(&page);
    const char *longer[] = {
        "nvidia_cuda_nvcc_cu12-12.4.1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "nvidia_cuda_nvcc_cu12-12.4.1.1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "nvidia_cuda_nvcc_cu12-12.4-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    };
    page = page_of(longer, sizeof longer / sizeof longer[0]);
    ck_assert_str_eq(md_index_pick(&page, "nvidia-cuda-nvcc-cu12", "x86_64", 12, 4, NULL)->version, "12.4.1.1");
    md_index_page_free(&page);
    /* the two-part release first, as the best so far, with the 99 of the wheel before it behind it */
    const char *shorter_first[] = { names[0], names[3], names[1] };
    page = page_of(shorter_first, 3);
    ck_assert_str_eq(md_index_pick(&page, "nvidia-cuda-nvcc-cu12", "x86_64", 12, 4, NULL)->version, "12.4.1");
    md_index_page_free(&page);
}
END_TEST

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(pip_index_url_follows_pips_order)
{
    char dir[] = "/tmp/msda-pip-XXXXXX", path[256], url[256], source[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    unsetenv("PIP_CONFIG_FILE");
    unsetenv("VIRTUAL_ENV");
    setenv("HOME", dir, 1);
    setenv("XDG_CONFIG_HOME", dir, 1);
    setenv("PIP_INDEX_URL", "https://env.example/simple", 1);
    ck_assert(md_pip_index_url(url, sizeof url, source, sizeof source));
    ck_assert_str_eq(url, "https://env.example/simple");
    ck_assert_str_eq(source, "PIP_INDEX_URL");
    unsetenv("PIP_INDEX_URL");
    /* ~/.pip/pip.conf, [global] */
    snprintf(path, sizeof path, "%s/.pip", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/.pip/pip.conf", dir);
    write_file(path, "# old\n[global]\ntimeout = 60\nindex-url = https://legacy.example/simple\n");
    /* (before /etc/xdg/pip/pip.conf and /etc/pip.conf, so whatever this machine has there) */
    ck_assert(md_pip_index_url(url, sizeof url, source, sizeof source));
    ck_assert_str_eq(url, "https://legacy.example/simple");
    ck_assert_str_eq(source, path);
    /* without XDG_CONFIG_HOME, or with a relative one (which the XDG rules ignore), the user's
     * file is ~/.config/pip/pip.conf, before the legacy one */
    char config[256];
    snprintf(config, sizeof config, "%s/.config", dir);
    ck_assert_int_eq(mkdir(config, 0755), 0);
    snprintf(config, sizeof config, "%s/.config/pip", dir);
    ck_assert_int_eq(mkdir(config, 0755), 0);
    snprintf(config, sizeof config, "%s/.config/pip/pip.conf", dir);
    write_file(config, "[global]\nindex-url = https://config.example/simple\n");
    unsetenv("XDG_CONFIG_HOME");
    ck_assert(md_pip_index_url(url, sizeof url, source, sizeof source));
    ck_assert_str_eq(url, "https://config.example/simple");
    ck_assert_str_eq(source, config);
    setenv("XDG_CONFIG_HOME", "relative/config", 1);
    ck_assert(md_pip_index_url(url, sizeof url, source, sizeof source));
    ck_assert_str_eq(source, config);
    setenv("XDG_CONFIG_HOME", dir, 1);
    /* $XDG_CONFIG_HOME/pip/pip.conf comes before it; [download] wins over [global] there */
    snprintf(path, sizeof path, "%s/pip", dir);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/pip/pip.conf", dir);
    write_file(path, "[download]\nindex_url: https://download.example/simple\n[global]\n  index-url =  https://g.example/simple  \n");
    ck_assert(md_pip_index_url(url, sizeof url, source, sizeof source));
    ck_assert_str_eq(url, "https://download.example/simple");
    /* PIP_CONFIG_FILE before all files */
    snprintf(path, sizeof path, "%s/custom.conf", dir);
    write_file(path, "[global]\nindex-url=https://custom.example/simple\n");
    setenv("PIP_CONFIG_FILE", path, 1);
    ck_assert(md_pip_index_url(url, sizeof url, source, sizeof source));
    ck_assert_str_eq(url, "https://custom.example/simple");
    md_remove_tree(dir);
    ck_assert_int_ne(access(dir, F_OK), 0);
}
END_TEST

/* The descriptors this process has open (the count's own DIR included, the same each time). */
static int open_descriptors(void)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* pip's configuration as the tests below set it: HOME and XDG_CONFIG_HOME a new folder (DIR's
 * template filled in), PIP_CONFIG_FILE its custom.conf (into PATH, not yet written), and neither
 * PIP_INDEX_URL nor a virtual environment. */
static void own_pip_config(char *dir, char *path, size_t size)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    unsetenv("PIP_INDEX_URL");
    unsetenv("VIRTUAL_ENV");
    setenv("HOME", dir, 1);
    setenv("XDG_CONFIG_HOME", dir, 1);
    snprintf(path, size, "%s/custom.conf", dir);
    setenv("PIP_CONFIG_FILE", path, 1);
}

START_TEST(pip_index_url_closes_each_file_it_reads)
{
    char dir[] = "/tmp/msda-pip-XXXXXX", path[256], url[256], source[512];
    own_pip_config(dir, path, sizeof path);
    write_file(path, "[global]\nindex-url = https://custom.example/simple\n");
    int before = open_descriptors();
    for (int i = 0; i < 4; i++) {
        ck_assert(md_pip_index_url(url, sizeof url, source, sizeof source));
        ck_assert_str_eq(url, "https://custom.example/simple");
    }
    /* a file without an index URL is read to its end and closed too */
    write_file(path, "[global]\ntimeout = 60\n");
    (void)md_pip_index_url(url, sizeof url, source, sizeof source);
    ck_assert_int_eq(open_descriptors(), before);
    unsetenv("PIP_CONFIG_FILE");
    md_remove_tree(dir);
}
END_TEST

/* An index URL is taken whole or not at all: one of 1500 bytes (over the 1023 once kept) comes
 * back whole; one too long for the caller's buffer, or on a line longer than any the reader
 * holds, gives no URL rather than its first part. */
START_TEST(pip_index_url_is_never_cut)
{
    char dir[] = "/tmp/msda-pip-XXXXXX", path[256], url[2048], source[512];
    own_pip_config(dir, path, sizeof path);
    static char long_url[1501], text[12000];
    memset(long_url, 'a', sizeof long_url - 1);
    memcpy(long_url, "https://", 8);
    snprintf(text, sizeof text, "[global]\nindex-url = %s\n", long_url);
    write_file(path, text);
    ck_assert(md_pip_index_url(url, sizeof url, source, sizeof source));
    ck_assert_uint_eq(strlen(url), 1500);
    ck_assert_str_eq(url, long_url);
    /* too long for the caller's buffer: no URL rather than a cut one */
    char small[1000];
    bool system_files = access("/etc/pip.conf", F_OK) == 0 || access("/etc/xdg/pip/pip.conf", F_OK) == 0;
    if (!system_files)
        ck_assert(!md_pip_index_url(small, sizeof small, source, sizeof source));
    /* a line of 9000 bytes (its first part alone would pass for a URL) */
    int at = snprintf(text, sizeof text, "[global]\nindex-url = https://");
    memset(text + at, 'b', 9000);
    snprintf(text + at + 9000, sizeof text - (size_t)at - 9000, "index-url = https://tail.example/simple\n");
    write_file(path, text);
    if (!system_files)
        ck_assert(!md_pip_index_url(url, sizeof url, source, sizeof source));
    else if (md_pip_index_url(url, sizeof url, source, sizeof source))
        ck_assert_str_ne(source, path);
    unsetenv("PIP_CONFIG_FILE");
    md_remove_tree(dir);
}
END_TEST

Suite *suite_fetch_index(void)
{
    Suite *s = suite_create("fetch_index");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, pick_takes_the_newest_final_release_of_major_minor_for_the_machine);
    tcase_add_test(tc, pick_compares_releases_of_different_lengths_as_zero_padded);
    tcase_add_test(tc, pip_index_url_follows_pips_order);
    tcase_add_test(tc, pip_index_url_closes_each_file_it_reads);
    tcase_add_test(tc, pip_index_url_is_never_cut);
    suite_add_tcase(s, tc);
    return s;
}
