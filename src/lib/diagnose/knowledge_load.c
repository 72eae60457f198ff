/* The knowledge base as diagnose loads it: parsed (knowledge.c), then every name the data uses
 * (fact keys, placeholders, evidence kinds, GPU choices, log facts) checked against the code's
 * vocabulary, whose tables live beside the code that evaluates them (diag_vocab.h). This sits
 * above both, so that neither the parser nor the tables depend on the other. */
#include "knowledge_load.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "diag_vocab.h"
#include "template.h"

static bool has_capture(const md_signature *a, const md_signature *b, const char *name)
{
    return (a && md_signature_capture(a, name)) || (b && md_signature_capture(b, name));
}

/* A fact key of the data: "key", "!key", or (where HINTS) "hint:NAME". */
static bool key_known(const md_knowledge *kb, const md_signature *a, const md_signature *b, const char *key,
                      bool hints, md_error *err)
{
    const char *name = key[0] == '!' ? key + 1 : key;
    if (hints && strncmp(name, "hint:", 5) == 0) {
        if (md_knowledge_hint(kb, name + 5))
            return true;
        md_fail(err, MD_ERR_INTERNAL, "signatures.json: %s names the hint '%s', which log_hints lacks", a->id, name + 5);
        return false;
    }
    const char *needs = NULL;
    if (!md_vocab_fact(name, &needs)) {
        md_fail(err, MD_ERR_INTERNAL, "signatures.json: %s names the fact key '%s', which the code lacks", a->id, name);
        return false;
    }
    if (needs && !has_capture(a, b, needs)) {
        md_fail(err, MD_ERR_INTERNAL, "signatures.json: %s uses the fact key '%s', which needs the capture '%s'", a->id,
                name, needs);
        return false;
    }
    return true;
}

static bool keys_known(const md_knowledge *kb, const md_signature *a, const md_signature *b, const char *const *keys,
                       size_t n, bool hints, md_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!key_known(kb, a, b, keys[i], hints, err))
            return false;
    return true;
}

/* Every {name} and {a|b} in TEXT is a capture of A or B or a placeholder of the code. */
static bool placeholders_known(const md_signature *a, const md_signature *b, const char *text, md_error *err)
{
    md_template_slot slot;
    for (const char *p = text; md_template_next(text, p, &slot); p = slot.start + slot.length) {
        char one[64];
        for (size_t pos = 0; md_template_alternative(&slot, &pos, one, sizeof one);) {
            const char *needs = NULL;
            if (has_capture(a, b, one))
                continue;
            if (!md_vocab_placeholder(one, &needs)) {
                md_fail(err, MD_ERR_INTERNAL, "signatures.json: %s uses the placeholder '{%s}', which the code lacks",
                        a->id, one);
                return false;
            }
            if (needs && !has_capture(a, b, needs)) {
                md_fail(err, MD_ERR_INTERNAL, "signatures.json: %s uses the placeholder '{%s}', which needs the "
                        "capture '%s'", a->id, one, needs);
                return false;
            }
        }
    }
    return true;
}

static bool texts_known(const md_signature *a, const md_signature *b, const char *const *texts, size_t n, md_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (!placeholders_known(a, b, texts[i], err))
            return false;
    return true;
}

static bool check_names(const md_knowledge *kb, md_error *err)
{
    for (size_t i = 0; i < kb->n_log_facts; i++)
        if (!md_vocab_log_fact(kb->log_facts[i].spec.name))
            return md_fail(err, MD_ERR_INTERNAL, "signatures.json: log_facts names '%s', which the code does not read",
                           kb->log_facts[i].spec.name), false;
    for (size_t i = 0; i < kb->count; i++) {
        const md_signature *s = &kb->sigs[i];
        if (!keys_known(kb, s, NULL, s->confirm, s->n_confirm, false, err) ||
            !keys_known(kb, s, NULL, s->rule_out, s->n_rule_out, false, err) ||
            !keys_known(kb, s, NULL, s->probe_when, s->n_probe_when, false, err) ||
            !texts_known(s, NULL, s->fix, s->n_fix, err) || !texts_known(s, NULL, s->notes, s->n_notes, err))
            return false;
        for (size_t k = 0; k < s->n_gpu; k++)
            if (!md_vocab_gpu_choice(s->gpu[k]))
                return md_fail(err, MD_ERR_INTERNAL, "signatures.json: %s names the GPU choice '%s', which the code "
                               "lacks", s->id, s->gpu[k]), false;
        for (size_t k = 0; k < s->n_evidence; k++)
            if (!md_vocab_evidence(s->evidence[k]))
                return md_fail(err, MD_ERR_INTERNAL, "signatures.json: %s names the evidence '%s', which the code lacks",
                               s->id, s->evidence[k]), false;
        for (size_t k = 0; k < s->n_causes; k++)
            if (!keys_known(kb, s, NULL, s->causes[k].when, s->causes[k].n_when, false, err) ||
                !placeholders_known(s, NULL, s->causes[k].text, err))
                return false;
        for (size_t r = 0; r < s->n_readings; r++) {
            const md_reading *rd = &s->readings[r];
            for (size_t k = 0; k < rd->n_causes; k++) {
                const md_reading_cause *rc = &rd->causes[k];
                const md_signature *target = &kb->sigs[rc->finding];
                if (!keys_known(kb, s, target, rc->pro, rc->n_pro, true, err) ||
                    !keys_known(kb, s, target, rc->con, rc->n_con, true, err) ||
                    !placeholders_known(target, s, rc->text, err))
                    return false;
            }
        }
    }
    return true;
}

static md_status checked(md_knowledge *kb, md_status st, md_error *err)
{
    if (st == MD_OK && !check_names(kb, err)) {
        md_knowledge_free(kb);
        return MD_ERR_INTERNAL;
    }
    return st;
}

md_status md_knowledge_load(md_knowledge *kb, md_error *err)
{
    return checked(kb, md_knowledge_parse(kb, err), err);
}

md_status md_knowledge_load_doc(md_knowledge *kb, void *doc, md_error *err)
{
    return checked(kb, md_knowledge_parse_doc(kb, doc, err), err);
}
