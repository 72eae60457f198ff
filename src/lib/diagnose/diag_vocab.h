/* The names recipes/signatures.json may use, and what the code does with each: fact keys,
 * placeholders, evidence kinds, GPU choices and log facts. The tables live beside the code that
 * evaluates them (diag_facts.c, diag_placeholders.c, diag_evidence.c, diag_logfacts.c);
 * knowledge_load.c checks the data against them.
 * Scope: private to src/lib/diagnose. */
#ifndef MD_DIAG_VOCAB_H
#define MD_DIAG_VOCAB_H

#include <stdbool.h>
#include <stddef.h>

/* Each answers whether NAME exists; *NEEDS (when not NULL) receives the name of a capture the
 * entry reads from the signature's log lines, or NULL when it needs none. */
bool md_vocab_fact(const char *name, const char **needs);
bool md_vocab_placeholder(const char *name, const char **needs);
bool md_vocab_evidence(const char *name);
bool md_vocab_gpu_choice(const char *name);
bool md_vocab_log_fact(const char *name);

#endif
