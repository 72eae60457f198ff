#include <stdlib.h>
#include "unit.h"

int main(void)
{
    SRunner *sr = srunner_create(suite_arch());
    srunner_add_suite(sr, suite_runs_on());
    srunner_add_suite(sr, suite_fatbin());
    srunner_add_suite(sr, suite_fixtures());
    srunner_add_suite(sr, suite_wheel());
    srunner_add_suite(sr, suite_elf_glibc());
    srunner_add_suite(sr, suite_logscan());
    srunner_add_suite(sr, suite_lognorm());
    srunner_add_suite(sr, suite_logfacts());
    srunner_add_suite(sr, suite_toolkit_table());
    srunner_add_suite(sr, suite_driver_table());
    srunner_add_suite(sr, suite_platform());
    srunner_add_suite(sr, suite_jetson_table());
    srunner_add_suite(sr, suite_cuda_driver());
    srunner_add_suite(sr, suite_zip_members());
    srunner_add_suite(sr, suite_redist_table());
    srunner_add_suite(sr, suite_fetch_index());
    srunner_add_suite(sr, suite_fetch_cache());
    srunner_add_suite(sr, suite_fetch_ca());
    srunner_add_suite(sr, suite_knowledge());
    srunner_add_suite(sr, suite_regex_syntax());
    srunner_add_suite(sr, suite_strv());
    srunner_add_suite(sr, suite_process());
    srunner_add_suite(sr, suite_status());
    srunner_add_suite(sr, suite_write_all());
    srunner_add_suite(sr, suite_alloc_failures());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
