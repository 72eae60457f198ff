/* msda-doctor diagnose: probe the machine, read failing logs, and tie what the logs say to what
 * the probes found. Produces checks (one per probe) and findings (one per finding ID of
 * recipes/signatures.json), root cause first. A log that does not look like it came from this
 * machine (or every log, with md_diagnose_options.foreign) is judged by what it says alone, and
 * this machine's own findings are kept apart. Nothing here prints.
 * Scope: public: src/cli may include it. */
#ifndef MD_DIAGNOSE_H
#define MD_DIAGNOSE_H

#include <stdbool.h>
#include <stdio.h>
#include "findings.h"

/* The checks diagnose runs, in report order: IDs ("gpu", ...) and names. */
typedef struct {
    const char *id;
    const char *name;
} md_check_info;
extern const md_check_info md_diagnose_checks[];
extern const size_t md_diagnose_n_checks;

/* Loads the knowledge base. MD_ERR_INTERNAL when the embedded data is broken. */
md_status md_diagnose_init(md_diagnosis *d, md_error *err);

/* Runs every probe (or none, with OPT->probe false). Never fails as a whole: a probe that
 * fails is a check with status MD_CHECK_ERROR. */
void md_diagnose_probe(md_diagnosis *d, const md_diagnose_options *opt);

/* Reads one log to its end and records what it matched. MD_ERR_IO when it cannot be read,
 * MD_ERR_ARGUMENT past MD_DIAG_MAX_LOGS. */
md_status md_diagnose_log(md_diagnosis *d, FILE *in, const char *name, md_error *err);

/* Judges where each log came from, adds the findings of the probes alone, ties every finding to
 * the machine or to its log (facts, evidence, ranked causes, fixes with placeholders filled) and
 * orders them root cause first, the machine's own findings after the logs'. Two findings that
 * come to the same ID are merged. Call once, last. */
md_status md_diagnose_finish(md_diagnosis *d, md_error *err);

void md_diagnose_free(md_diagnosis *d);

const char *md_log_origin_name(md_log_origin o);

#endif
