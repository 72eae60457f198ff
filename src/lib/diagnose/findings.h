/* What diagnose produces: findings (one per finding ID, with causes, evidence and fixes), the
 * facts read from each log and how a log compares with this machine, and the diagnosis that
 * holds them with the probes' checks. Types only: filled by the diagnose files, rendered by the CLI.
 * Scope: public: src/cli may include it. */
#ifndef MD_FINDINGS_H
#define MD_FINDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include "diagnose/probes/diag.h"
#include "knowledge.h"
#include "logscan.h"

#define MD_FINDING_EVIDENCE 16
#define MD_DIAG_MAX_CHECKS 8
#define MD_DIAG_MAX_LOGS 32
#define MD_LOG_MAX_ARCHS 32
#define MD_LOG_MAX_COMPARED 12

/* One ranked reading of an ambiguous message. */
typedef struct {
    const md_signature *sig;       /* the finding this reading amounts to */
    char text[768];
    int score;                     /* keys for minus keys against that hold */
    const char *pro[MD_SIG_MAX_ITEMS];
    size_t n_pro;
    const char *con[MD_SIG_MAX_ITEMS];
    size_t n_con;
} md_finding_cause;

typedef struct {
    const md_signature *sig;       /* the finding reported */
    const md_signature *matched;   /* whose patterns the log matched (sig unless a reading ranked another first) */
    const md_reading *reading;     /* the ambiguous message matched, or NULL */
    bool from_log;                 /* matched in a log (else found by the probes alone) */
    bool on_machine;               /* judged with this machine's facts (false: by the log alone) */
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
    md_finding_cause causes[MD_SIG_MAX_CAUSES]; /* readings of an ambiguous message, best first */
    size_t n_causes;
    const md_signature *tied_with; /* another finding whose reading scored as high as the first, where
                                    * nothing in the log or on the machine decides; NULL when decided */
} md_finding;

/* What a log says about the machine it came from (recipes/signatures.json, log_facts). */
typedef struct {
    char host[128];
    char gpu_name[128];
    unsigned sm;                   /* the GPU's compute capability as 61; 0: not said */
    char torch_version[64];
    char torch_cuda[16];
    char nvcc_version[16];
    char gcc_version[32];
    char driver[32];
    int driver_cuda;               /* the CUDA version that driver runs, 12020: said by the log (nvidia-smi's
                                    * "CUDA Version", torch's "found version 12040") or that of its
                                    * driver's branch; 0: not known */
    unsigned build_sms[MD_LOG_MAX_ARCHS];     /* -gencode code=sm_/compute_ and TORCH_CUDA_ARCH_LIST */
    bool build_ptx[MD_LOG_MAX_ARCHS];
    size_t n_build;
    char arch_list[128];           /* TORCH_CUDA_ARCH_LIST as written */
    bool hints[MD_KB_MAX_NAMED];   /* log_hints seen, in the data's order */
} md_log_facts;

typedef enum { MD_ORIGIN_UNKNOWN = 0, MD_ORIGIN_HERE, MD_ORIGIN_ELSEWHERE } md_log_origin;

/* One fact the log and the probes both give. */
typedef struct {
    const char *fact;              /* "host", "gpu_name", ... */
    char log[128];
    char machine[192];
    bool same;
} md_log_comparison;

typedef struct {
    char name[PATH_MAX];           /* as given; "-" is standard input */
    unsigned long long lines, bytes, long_lines;
    md_log_facts facts;
    md_log_origin origin;          /* as the comparison found it */
    bool foreign;                  /* judged by the log alone (origin elsewhere, or --foreign) */
    md_log_comparison compared[MD_LOG_MAX_COMPARED];
    size_t n_compared;
    size_t n_findings;             /* findings this log matched */
} md_log_info;

typedef struct {
    bool probe;                    /* false: --no-probe, logs only */
    bool foreign;                  /* judge every log by itself alone */
    const char *root;              /* prefix for /etc, /proc and library folders ("" or NULL: /) */
    const char *python;            /* NULL: python3 on PATH */
    const char *const *search_dirs;
    size_t n_search_dirs;
} md_diagnose_options;

typedef struct {
    md_knowledge kb;
    md_machine *machine;           /* calloc'd: it is large */
    bool probed;
    bool foreign;
    md_check checks[MD_DIAG_MAX_CHECKS];
    size_t n_checks;
    md_finding *findings;
    size_t n_findings, cap_findings;
    md_log_info logs[MD_DIAG_MAX_LOGS];
    size_t n_logs;
} md_diagnosis;

#endif
