/* Shared by the diagnose files, not by the CLI: the view a finding is judged in, and the
 * evaluation of the data's names (diag_vocab.h) in that view.
 * Scope: private to src/lib/diagnose. */
#ifndef MD_DIAG_INTERNAL_H
#define MD_DIAG_INTERNAL_H

#include "diag_vocab.h"
#include "findings.h"

#define MD_UNKNOWN (-1)

/* What one finding is judged on: this machine (M, NULL when the log came from elsewhere, with
 * --foreign or --no-probe), the facts of its log (LF, NULL for a finding of the probes alone),
 * and the finding itself (its log lines, its GPU). */
typedef struct {
    const md_diagnosis *d;
    const md_machine *m;
    const md_log_facts *lf;
    const md_finding *f;
} md_view;

/* A fact key: "key", "!key" (known and false), or "hint:NAME" (a log hint seen). 1 true,
 * 0 false, MD_UNKNOWN when neither the machine nor the log tells. */
int md_view_fact(const md_view *v, const char *key);

/* The value of placeholder NAME (a capture of the finding's signatures first, then the code's
 * placeholder) into OUT; false when neither gives one. */
bool md_view_value(const md_view *v, const char *name, char *out, size_t size);

/* One sentence into OUT saying that a command needing placeholder NAME is left out,
 * and why nothing gives its value (and, for a toolkit, which CUDA release to install). */
void md_view_missing(const md_view *v, const char *name, char *out, size_t size);

/* The capture NAME from the finding's kept log lines (matching lines first, then the context
 * nearest the first hit), through the reported signature's spec, then the matched one's. */
bool md_view_capture(const md_view *v, const char *name, char *out, size_t size);

/* Adds the evidence lines of KIND (the data's "evidence" list) to F. */
void md_view_evidence(const md_view *v, const char *kind, md_finding *f);

/* The GPU CHOICE picks in the machine, or -1. */
int md_view_gpu_choice(const md_view *v, const char *choice);

/* The GPU of the machine the finding is about, or NULL when it is judged without the machine. */
const md_machine_gpu *md_view_machine_gpu(const md_view *v);

/* A compute capability written "8.6" or "86" as an SM number (86); 0 when it is neither. */
unsigned md_sm_of_text(const char *text);

/* The GPU, CUDA and compiler the finding is about: the machine's where it is judged on the
 * machine and knows, else the log's. */
unsigned md_view_gpu_sm(const md_view *v);
const char *md_view_gpu_name(const md_view *v);
const char *md_view_torch_cuda(const md_view *v);
const char *md_view_nvcc_version(const md_view *v);
unsigned md_view_gcc_major(const md_view *v);

/* The CUDA version of the driver the finding is about, 12020: the machine's where it is judged on
 * the machine (0 when its driver did not load), else what the log says; 0 when not known. */
int md_view_driver_cuda(const md_view *v);

void md_finding_add_evidence(md_finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads the log facts and hints out of one scanned log. */
void md_log_facts_read(const md_knowledge *kb, const md_log_result *r, md_log_facts *out);

/* Compares LOG's facts with the machine's and sets its origin. */
void md_log_compare(const md_machine *m, md_log_info *log);

/* Ties F to the machine or its log: GPU, facts, evidence, causes ranked, fixes filled. */
void md_finding_fill(const md_diagnosis *d, md_finding *f);

/* Whether the probes alone raise SIG on this machine (its probe_when keys all true). */
bool md_probe_raises(const md_diagnosis *d, const md_signature *sig);

#endif
