/* Checking a built wheel on this machine: its RECORD, then its libmsda.so loaded here, running
 * forward and backward on the CPU and on every GPU, each compared with the CPU path in f64.
 * Scope: public: src/cli may include it. */
#ifndef MD_VERIFY_H
#define MD_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"
#include "verify_report.h"

/* Verifies WHEEL. Returns MD_OK when the checks ran (REPORT says whether they passed), or an
 * error when the wheel cannot be read or its library cannot be loaded here (another CPU
 * platform, say). Free REPORT with md_verify_report_free. */
md_status md_verify_wheel(const char *wheel, md_verify_report *report, md_error *err);

void md_verify_report_free(md_verify_report *report);

#endif
