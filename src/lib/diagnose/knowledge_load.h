/* Loading the failure knowledge base for diagnose: recipes/signatures.json parsed, and every
 * name it uses checked against the code's vocabulary: data naming a fact key, placeholder,
 * evidence kind, GPU choice or log fact the code does not have is broken data, not a silent
 * "unknown".
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_KNOWLEDGE_LOAD_H
#define MD_KNOWLEDGE_LOAD_H

#include "knowledge.h"

/* Loads the embedded signatures. Malformed data, or a name the code lacks, is MD_ERR_INTERNAL
 * naming it. Free with md_knowledge_free. */
md_status md_knowledge_load(md_knowledge *kb, md_error *err);

/* The same from DOC, which the knowledge base takes over (freed by md_knowledge_free, or here on
 * failure). For tests of the checks. */
md_status md_knowledge_load_doc(md_knowledge *kb, void *doc, md_error *err);

#endif
