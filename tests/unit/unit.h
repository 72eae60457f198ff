/* The unit-test suites (Check framework), one per library part. */
#ifndef MD_UNIT_H
#define MD_UNIT_H
#include <check.h>

Suite *suite_arch(void);
Suite *suite_runs_on(void);
Suite *suite_fatbin(void);
Suite *suite_fixtures(void);
Suite *suite_wheel(void);
Suite *suite_elf_glibc(void);
Suite *suite_logscan(void);
Suite *suite_lognorm(void);
Suite *suite_logfacts(void);
Suite *suite_toolkit_table(void);
Suite *suite_driver_table(void);
Suite *suite_platform(void);
Suite *suite_jetson_table(void);
Suite *suite_cuda_driver(void);
Suite *suite_zip_members(void);
Suite *suite_redist_table(void);
Suite *suite_fetch_index(void);
Suite *suite_fetch_cache(void);
Suite *suite_fetch_ca(void);
Suite *suite_knowledge(void);
Suite *suite_regex_syntax(void);
Suite *suite_strv(void);
Suite *suite_process(void);
Suite *suite_status(void);
Suite *suite_write_all(void);
Suite *suite_alloc_failures(void);

#endif
