/* The failure knowledge base: recipes/signatures.json (schema in recipes/README.md),
 * one entry per finding ID of docs/DESIGN.md, plus the log facts and hints read from whole logs,
 * parsed from the embedded copy. Checking its names against the code is knowledge_load.h's.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_KNOWLEDGE_H
#define MD_KNOWLEDGE_H

#include <stdbool.h>
#include <regex.h>
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
    regex_t compiled[MD_SIG_MAX_ITEMS]; /* RE compiled at load (signatures' captures, log facts) */
    size_t n_compiled;
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

/* Parses the embedded signatures, resolves the IDs they name and compiles their patterns and
 * captures. Malformed data is MD_ERR_INTERNAL naming it. The names the data uses are checked
 * against the code's vocabulary one floor up (knowledge_load.h), which is what diagnose loads.
 * Free with md_knowledge_free. */
md_status md_knowledge_parse(md_knowledge *kb, md_error *err);
/* The same from DOC, which the knowledge base takes over (freed by md_knowledge_free, or here
 * on failure). */
md_status md_knowledge_parse_doc(md_knowledge *kb, void *doc, md_error *err);
void md_knowledge_free(md_knowledge *kb);

/* The signature with ID, or NULL. */
const md_signature *md_knowledge_find(const md_knowledge *kb, const char *id);

/* The capture named NAME of SIG, or NULL. */
const md_capture_spec *md_signature_capture(const md_signature *sig, const char *name);

/* The hint named NAME, or NULL. */
const md_named_patterns *md_knowledge_hint(const md_knowledge *kb, const char *name);

#endif
