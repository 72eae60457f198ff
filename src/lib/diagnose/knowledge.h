/* The failure knowledge base: recipes/signatures.json (schema in tests/fixtures/logs/README.md),
 * one entry per finding ID of DESIGN.md, plus the log facts and hints read from whole logs,
 * loaded from the embedded copy. Every name the data uses (fact keys, placeholders, evidence
 * kinds, GPU choices, log facts) is checked against the code's vocabulary (diag_vocab.h) at
 * load: data naming something the code lacks is broken data, not a silent "unknown".
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_KNOWLEDGE_H
#define MD_KNOWLEDGE_H

#include <stdbool.h>
#include <stddef.h>
#include "logscan.h"
#include "base/status.h"

#define MD_SIG_MAX_ITEMS 12
#define MD_SIG_MAX_CAPTURES 6
#define MD_SIG_MAX_CAUSES 4
#define MD_SIG_MAX_READINGS 2
#define MD_KB_MAX_NAMED 16

/* Regular expressions (POSIX ERE) whose capture group GROUP[i] gives a value. */
typedef struct {
    const char *name;
    const char *re[MD_SIG_MAX_ITEMS];
    int group[MD_SIG_MAX_ITEMS];
    size_t n;
} md_capture_spec;

/* A cause sentence used when every key of WHEN is true ("!key": false). */
typedef struct {
    const char *when[MD_SIG_MAX_ITEMS];
    size_t n_when;
    const char *text;
} md_cause_spec;

/* One way to read an ambiguous message: the finding it amounts to and what argues for or
 * against it (fact keys, "!key", or "hint:NAME" of log_hints). */
typedef struct {
    const char *finding_id;
    size_t finding;                 /* index of FINDING_ID into md_knowledge.sigs */
    const char *text;
    const char *pro[MD_SIG_MAX_ITEMS];
    size_t n_pro;
    const char *con[MD_SIG_MAX_ITEMS];
    size_t n_con;
} md_reading_cause;

/* An ambiguous message of a signature: PATTERNS (none: every match of the signature) and its
 * causes in the data's order, which breaks ties. */
typedef struct {
    const char *patterns[MD_SIG_MAX_ITEMS];
    size_t n_patterns;
    size_t group;                   /* matcher group of PATTERNS, when there are any */
    md_reading_cause causes[MD_SIG_MAX_CAUSES];
    size_t n_causes;
} md_reading;

typedef struct {
    const char *id;                 /* the finding ID; strings borrowed from the JSON document */
    const char *severity;           /* "error" or "warning" */
    const char *title;
    const char *meaning;
    int root_rank;                  /* lower: more likely the root cause */
    const char *patterns[MD_SIG_MAX_ITEMS];
    size_t n_patterns;
    const char *confirm[MD_SIG_MAX_ITEMS];
    size_t n_confirm;
    const char *rule_out[MD_SIG_MAX_ITEMS];
    size_t n_rule_out;
    const char *fix[MD_SIG_MAX_ITEMS];
    size_t n_fix;
    const char *notes[MD_SIG_MAX_ITEMS];
    size_t n_notes;
    const char *gpu[MD_SIG_MAX_ITEMS];        /* GPU choices, tried in order */
    size_t n_gpu;
    const char *evidence[MD_SIG_MAX_ITEMS];   /* evidence kinds from the machine */
    size_t n_evidence;
    const char *probe_when[MD_SIG_MAX_ITEMS]; /* the probes alone raise it when all are true */
    size_t n_probe_when;
    md_capture_spec captures[MD_SIG_MAX_CAPTURES];
    size_t n_captures;
    md_cause_spec causes[MD_SIG_MAX_CAUSES];
    size_t n_causes;
    md_reading readings[MD_SIG_MAX_READINGS];
    size_t n_readings;
} md_signature;

/* A named list of patterns read from whole logs: a log fact (with capture groups) or a hint. */
typedef struct {
    md_capture_spec spec;
    size_t group;                   /* matcher group */
} md_named_patterns;

typedef struct {
    void *doc;                      /* the json_t the strings point into */
    md_signature *sigs;
    size_t count;
    md_named_patterns log_facts[MD_KB_MAX_NAMED];
    size_t n_log_facts;
    md_named_patterns hints[MD_KB_MAX_NAMED];
    size_t n_hints;
    size_t n_groups;                /* signatures, then readings, log facts and hints */
    md_log_matcher matcher;
} md_knowledge;

/* Loads and validates the embedded signatures and compiles their patterns. Malformed data, or
 * data naming a key, placeholder, evidence kind, GPU choice or log fact the code does not have,
 * is MD_ERR_INTERNAL naming it. Free with md_knowledge_free. */
md_status md_knowledge_load(md_knowledge *kb, md_error *err);
/* The same from DOC, which the knowledge base takes over (freed by md_knowledge_free, or here
 * on failure). For tests of the checks. */
md_status md_knowledge_load_doc(md_knowledge *kb, void *doc, md_error *err);
void md_knowledge_free(md_knowledge *kb);

/* The signature with ID, or NULL. */
const md_signature *md_knowledge_find(const md_knowledge *kb, const char *id);

/* The capture named NAME of SIG, or NULL. */
const md_capture_spec *md_signature_capture(const md_signature *sig, const char *name);

/* The hint named NAME, or NULL. */
const md_named_patterns *md_knowledge_hint(const md_knowledge *kb, const char *name);

#endif
