/* msda-doctor diagnose: probe the machine, read failing logs, and tie what the logs say to what
 * the probes found. Produces checks (one per probe) and findings (one per finding ID of
 * recipes/signatures.json), root cause first. Nothing here prints. */
#ifndef MD_DIAGNOSE_H
#define MD_DIAGNOSE_H

#include <stdbool.h>
#include <stdio.h>
#include "diag.h"
#include "knowledge.h"
#include "logscan.h"

#define MD_FINDING_EVIDENCE 16
#define MD_DIAG_MAX_CHECKS 8
#define MD_DIAG_MAX_LOGS 32

typedef struct {
    const md_signature *sig;
    bool from_log;                 /* matched in a log (else found by the probes alone) */
    size_t log_index;              /* the first log that matched */
    unsigned long long first_line; /* in that log */
    unsigned long long count;      /* matching lines in all logs */
    md_log_group_hits hits;        /* the first log's hits and context */
    int gpu;                       /* index into machine.gpus the finding is about, or -1 */
    char cause[1024];
    char evidence[MD_FINDING_EVIDENCE][512];
    size_t n_evidence;
    char fix[MD_SIG_MAX_ITEMS][512];
    size_t n_fix;
    char notes[MD_SIG_MAX_ITEMS][768];
    size_t n_notes;
    const char *confirmed[MD_SIG_MAX_ITEMS];  /* probe-fact keys true on this machine */
    size_t n_confirmed;
    const char *ruled_out[MD_SIG_MAX_ITEMS];
    size_t n_ruled_out;
} md_finding;

typedef struct {
    char name[PATH_MAX];           /* as given; "-" is standard input */
    unsigned long long lines, bytes, long_lines;
} md_log_info;

typedef struct {
    bool probe;                    /* false: --no-probe, logs only */
    const char *root;              /* prefix for /etc, /proc and library folders ("" or NULL: /) */
    const char *python;            /* NULL: python3 on PATH */
    const char *const *search_dirs;
    size_t n_search_dirs;
} md_diagnose_options;

typedef struct {
    md_knowledge kb;
    md_machine *machine;           /* calloc'd: it is large */
    bool probed;
    md_check checks[MD_DIAG_MAX_CHECKS];
    size_t n_checks;
    md_finding *findings;
    size_t n_findings, cap_findings;
    md_log_info logs[MD_DIAG_MAX_LOGS];
    size_t n_logs;
} md_diagnosis;

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

/* Adds the findings of the probes alone, ties every finding to the machine (facts, evidence,
 * cause, fixes with placeholders filled) and orders them root cause first. Call once, last. */
md_status md_diagnose_finish(md_diagnosis *d, md_error *err);

void md_diagnose_free(md_diagnosis *d);

/* Internal to the diagnose files: facts and text for one finding. */
int md_fact(const md_diagnosis *d, const md_finding *f, const char *key); /* 1 true, 0 false, -1 unknown */
void md_finding_fill(const md_diagnosis *d, md_finding *f);

#endif
