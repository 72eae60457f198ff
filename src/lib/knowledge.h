/* The failure knowledge base: recipes/signatures.json (schema in tests/fixtures/logs/README.md),
 * one entry per finding ID of DESIGN.md, loaded from the embedded copy. */
#ifndef MD_KNOWLEDGE_H
#define MD_KNOWLEDGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include "logscan.h"
#include "status.h"

#define MD_SIG_MAX_ITEMS 12

typedef struct {
    const char *id;                 /* "no-kernel-image"; strings borrowed from the JSON document */
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
} md_signature;

typedef struct {
    void *doc;                      /* the json_t the strings point into */
    md_signature *sigs;
    size_t count;
    md_log_matcher matcher;         /* every pattern, grouped by signature index */
} md_knowledge;

/* Loads and validates the embedded signatures and compiles their patterns. Malformed data is
 * MD_ERR_INTERNAL naming the entry. Free with md_knowledge_free. */
md_status md_knowledge_load(md_knowledge *kb, md_error *err);
/* The same from DOC, shaped like signatures.json (the fuzz target feeds it broken ones); KB takes
 * its own reference to DOC. */
md_status md_knowledge_load_json(md_knowledge *kb, json_t *doc, md_error *err);
void md_knowledge_free(md_knowledge *kb);

/* The signature with ID, or NULL. */
const md_signature *md_knowledge_find(const md_knowledge *kb, const char *id);

#endif
