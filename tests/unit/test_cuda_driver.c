/* The one table of CUDA driver entry points, against the tests' fake driver (MSDA_FAKE_LIBCUDA),
 * which has the device queries and none of the compute calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "machine/cuda_driver.h"
#include "unit.h"

static void use_fake(const char *gpus)
{
    const char *fake = getenv("MSDA_FAKE_LIBCUDA");
    ck_assert_msg(fake && *fake, "MSDA_FAKE_LIBCUDA is not set (make check-unit sets it)");
    ck_assert_int_eq(setenv("MSDA_LIBCUDA", fake, 1), 0);
    char path[4096];
    snprintf(path, sizeof path, "tests/fixtures/gpus/%s", gpus); /* make runs the tests from the top */
    ck_assert_int_eq(setenv("MSDA_FAKE_GPUS", path, 1), 0);
}

START_TEST(fake_driver_binds_the_device_queries)
{
    use_fake("a100.json");
    md_libcuda cuda;
    md_error err;
    ck_assert_int_eq(md_libcuda_open(&cuda, &err), MD_OK);
    ck_assert_int_eq(cuda.init_result, 0);
    ck_assert_int_gt(cuda.driver_version, 0);
    ck_assert_int_eq(md_libcuda_require(&cuda, MD_CUDA_DEVICES, &err), MD_OK);
    int n = 0, major = 0;
    ck_assert_int_eq(cuda.device_get_count(&n), 0);
    ck_assert_int_ge(n, 1);
    ck_assert_int_eq(cuda.device_get_attribute(&major, MD_CU_ATTR_COMPUTE_CAPABILITY_MAJOR, 0), 0);
    ck_assert_int_eq(major, 8);
    ck_assert_ptr_nonnull(cuda.device_total_mem);
}
END_TEST

START_TEST(missing_group_names_the_first_entry_point)
{
    use_fake("a100.json");
    md_libcuda cuda;
    md_error err;
    ck_assert_int_eq(md_libcuda_open(&cuda, &err), MD_OK);
    ck_assert_ptr_null(cuda.primary_ctx_retain);
    ck_assert_int_eq(md_libcuda_require(&cuda, MD_CUDA_DEVICES | MD_CUDA_COMPUTE, &err), MD_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "cuDevicePrimaryCtxRetain") && strstr(err.message, cuda.path),
                  "message: %s", err.message);
}
END_TEST

START_TEST(error_names_come_from_the_driver)
{
    use_fake("none.json");
    md_libcuda cuda;
    md_error err;
    ck_assert_int_eq(md_libcuda_open(&cuda, &err), MD_OK);
    ck_assert_int_eq(cuda.init_result, MD_CUDA_ERROR_NO_DEVICE);
    ck_assert_str_eq(md_libcuda_error_name(&cuda, MD_CUDA_ERROR_NO_DEVICE), "CUDA_ERROR_NO_DEVICE");
    ck_assert_str_eq(md_libcuda_error_name(&cuda, 123456), "unknown CUDA error");
}
END_TEST

START_TEST(no_library_or_not_a_driver)
{
    md_libcuda cuda;
    md_error err;
    ck_assert_int_eq(setenv("MSDA_LIBCUDA", "/nonexistent/libcuda.so.1", 1), 0);
    ck_assert_int_eq(md_libcuda_open(&cuda, &err), MD_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "no CUDA driver"));
    ck_assert_ptr_null(cuda.lib);
    ck_assert_int_eq(setenv("MSDA_LIBCUDA", "libm.so.6", 1), 0);
    ck_assert_int_eq(md_libcuda_open(&cuda, &err), MD_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "'libm.so.6' lacks the CUDA driver API"), "message: %s", err.message);
    ck_assert_ptr_null(cuda.lib);
}
END_TEST

/* MSDA_LIBCUDA unset or empty: the system's driver, by its soname. The fake is loaded first, so
 * that the soname finds it already in the process (dlopen matches a loaded library's soname)
 * rather than whatever driver this machine has. */
START_TEST(no_variable_means_the_system_driver)
{
    use_fake("a100.json");
    md_libcuda fake;
    md_error err;
    ck_assert_int_eq(md_libcuda_open(&fake, &err), MD_OK);
    const char *values[] = { NULL, "" };
    for (size_t i = 0; i < 2; i++) {
        if (values[i])
            ck_assert_int_eq(setenv("MSDA_LIBCUDA", values[i], 1), 0);
        else
            ck_assert_int_eq(unsetenv("MSDA_LIBCUDA"), 0);
        md_libcuda cuda;
        ck_assert_msg(md_libcuda_open(&cuda, &err) == MD_OK, "%s", err.message);
        ck_assert_str_eq(cuda.path, "libcuda.so.1");
        ck_assert_ptr_eq(cuda.lib, fake.lib);
    }
}
END_TEST

/* cuInit without cuDriverGetVersion is refused too: open calls both. */
START_TEST(cuinit_alone_is_not_a_driver)
{
    const char *lib = getenv("MSDA_CUINIT_ONLY");
    ck_assert_msg(lib && *lib, "MSDA_CUINIT_ONLY is not set (make check-unit sets it)");
    ck_assert_int_eq(setenv("MSDA_LIBCUDA", lib, 1), 0);
    md_libcuda cuda;
    md_error err;
    ck_assert_int_eq(md_libcuda_open(&cuda, &err), MD_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "lacks the CUDA driver API"), "message: %s", err.message);
    ck_assert_ptr_null(cuda.lib);
}
END_TEST

Suite *suite_cuda_driver(void)
{
    Suite *s = suite_create("cuda_driver");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, fake_driver_binds_the_device_queries);
    tcase_add_test(tc, missing_group_names_the_first_entry_point);
    tcase_add_test(tc, error_names_come_from_the_driver);
    tcase_add_test(tc, no_library_or_not_a_driver);
    tcase_add_test(tc, cuinit_alone_is_not_a_driver);
    tcase_add_test(tc, no_variable_means_the_system_driver);
    suite_add_tcase(s, tc);
    return s;
}
