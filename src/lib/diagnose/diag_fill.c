/* Ties one finding to the machine, or to its log alone: which GPU it is about, the facts that
 * confirm or argue against it, the evidence, the ranked readings of an ambiguous message, the
 * cause in one sentence, and the fixes and notes with their {placeholders} filled (a command
 * or note whose value nothing gives is left out; for a command, a note says why). Everything a
 * finding says comes from recipes/signatures.json; this file only applies it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diag_internal.h"
#include "template.h"

/* Copies TEMPLATE into OUT with every {name} (or {a|b}: the first that has a value) replaced.
 * False when a slot has no value: OUT is then not to be shown, and *MISSING (when not NULL)
 * points at that slot's first name, of *MISSING_LEN bytes, for the words that say why. */
static bool fill(const md_view *v, const char *template, char *out, size_t size, const char **missing,
                 size_t *missing_len)
{
    size_t at = 0;
    out[0] = '\0';
    const char *p = template;
    md_template_slot slot;
    bool have = md_template_next(template, p, &slot);
    while (*p && at + 1 < size) {
        if (!have || p < slot.start) {
            out[at++] = *p++;
            out[at] = '\0';
            continue;
        }
        char value[512] = "", name[64];
        bool found = false;
        for (size_t pos = 0; !found && md_template_alternative(&slot, &pos, name, sizeof name);)
            found = md_view_value(v, name, value, sizeof value);
        if (!found) {
            if (missing) {
                *missing = slot.names;
                *missing_len = strcspn(slot.names, "|}");
            }
            return false;
        }
        at += (size_t)snprintf(out + at, size - at, "%s", value);
        if (at >= size)
            at = size - 1;
        p = slot.start + slot.length;
        have = md_template_next(template, p, &slot);
    }
    return true;
}

/* Says in a note that a command needing placeholder NAME (LEN bytes) was left out, and why;
 * once per name. */
static void note_missing(const md_view *v, md_finding *f, const char *name, size_t len)
{
    char key[64], words[sizeof f->notes[0]];
    snprintf(key, sizeof key, "%.*s", (int)len, name);
    md_view_missing(v, key, words, sizeof words);
    for (size_t i = 0; i < f->n_notes; i++)
        if (strcmp(f->notes[i], words) == 0)
            return;
    if (f->n_notes < MD_SIG_MAX_ITEMS)
        snprintf(f->notes[f->n_notes++], sizeof f->notes[0], "%s", words);
}

static bool all_true(const md_view *v, const char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (md_view_fact(v, keys[i]) != 1)
            return false;
    return true;
}

/* What the log itself says about its machine, as one line of evidence. */
static void log_facts_evidence(const md_log_facts *lf, md_finding *f)
{
    char line[512];
    size_t at = 0;
#define ADD(...) (at += (size_t)snprintf(line + at, at < sizeof line ? sizeof line - at : 0, __VA_ARGS__))
    if (lf->gpu_name[0])
        ADD("%sGPU %s", at ? ", " : "", lf->gpu_name);
    if (lf->sm)
        ADD("%ssm_%u", at ? ", " : "", lf->sm);
    if (lf->torch_version[0])
        ADD("%storch %s", at ? ", " : "", lf->torch_version);
    if (lf->torch_cuda[0])
        ADD("%storch's CUDA %s", at ? ", " : "", lf->torch_cuda);
    if (lf->nvcc_version[0])
        ADD("%snvcc %s", at ? ", " : "", lf->nvcc_version);
    if (lf->gcc_version[0])
        ADD("%sgcc %s", at ? ", " : "", lf->gcc_version);
    if (lf->driver[0])
        ADD("%sdriver %s", at ? ", " : "", lf->driver);
    for (size_t i = 0; i < lf->n_build && at < sizeof line; i++)
        ADD("%s%s_%u", i ? " " : at ? ", built for " : "built for ", lf->build_ptx[i] ? "compute" : "sm", lf->build_sms[i]);
#undef ADD
    if (at)
        md_finding_add_evidence(f, "the log says: %s", line);
}

/* Scores each reading of the ambiguous message and orders them, best first (ties: the data's
 * order). The finding becomes the best reading's; a reading of another finding with the same
 * score is kept as tied_with, so that the report says nothing decided between them. */
static void rank_readings(const md_view *v, md_finding *f)
{
    const md_reading *rd = f->reading;
    f->n_causes = 0;
    for (size_t i = 0; i < rd->n_causes; i++) {
        const md_reading_cause *rc = &rd->causes[i];
        md_finding_cause *c = &f->causes[f->n_causes++];
        memset(c, 0, sizeof *c);
        c->sig = &v->d->kb.sigs[rc->finding];
        for (size_t k = 0; k < rc->n_pro; k++)
            if (md_view_fact(v, rc->pro[k]) == 1)
                c->pro[c->n_pro++] = rc->pro[k];
        for (size_t k = 0; k < rc->n_con; k++)
            if (md_view_fact(v, rc->con[k]) == 1)
                c->con[c->n_con++] = rc->con[k];
        c->score = (int)c->n_pro - (int)c->n_con;
    }
    for (size_t i = 1; i < f->n_causes; i++) /* stable: insertion */
        for (size_t k = i; k > 0 && f->causes[k].score > f->causes[k - 1].score; k--) {
            md_finding_cause t = f->causes[k];
            f->causes[k] = f->causes[k - 1];
            f->causes[k - 1] = t;
        }
    f->sig = f->causes[0].sig;
    f->tied_with = NULL;
    for (size_t i = 1; i < f->n_causes && !f->tied_with; i++)
        if (f->causes[i].score == f->causes[0].score && f->causes[i].sig != f->sig)
            f->tied_with = f->causes[i].sig;
}

void md_finding_fill(const md_diagnosis *d, md_finding *f)
{
    md_view v = { .d = d, .m = f->on_machine ? d->machine : NULL,
                  .lf = f->from_log ? &d->logs[f->log_index].facts : NULL, .f = f };
    if (!f->matched)
        f->matched = f->sig;
    f->gpu = -1;
    if (f->reading)
        rank_readings(&v, f);
    for (size_t i = 0; i < f->sig->n_gpu && f->gpu < 0; i++)
        f->gpu = md_view_gpu_choice(&v, f->sig->gpu[i]);
    if (f->gpu < 0 && v.m && v.m->n_gpus)
        f->gpu = 0;
    f->n_confirmed = f->n_ruled_out = f->n_evidence = 0;
    for (size_t i = 0; i < f->sig->n_confirm; i++)
        if (md_view_fact(&v, f->sig->confirm[i]) == 1)
            f->confirmed[f->n_confirmed++] = f->sig->confirm[i];
    for (size_t i = 0; i < f->sig->n_rule_out; i++)
        if (md_view_fact(&v, f->sig->rule_out[i]) == 1)
            f->ruled_out[f->n_ruled_out++] = f->sig->rule_out[i];
    if (f->from_log) {
        const md_log_line *h = &f->hits.hits[0];
        md_finding_add_evidence(f, "%s:%llu: %s", d->logs[f->log_index].name, h->line, h->text);
        if (f->count > 1)
            md_finding_add_evidence(f, "%llu lines in all match", f->count);
        log_facts_evidence(v.lf, f);
    }
    for (size_t i = 0; i < f->sig->n_evidence; i++)
        md_view_evidence(&v, f->sig->evidence[i], f);
    for (size_t i = 0; i < f->n_causes; i++)
        for (size_t k = 0; k < f->reading->n_causes; k++)
            if (&d->kb.sigs[f->reading->causes[k].finding] == f->causes[i].sig &&
                !fill(&v, f->reading->causes[k].text, f->causes[i].text, sizeof f->causes[i].text, NULL, NULL))
                snprintf(f->causes[i].text, sizeof f->causes[i].text, "%s", f->causes[i].sig->meaning);
    snprintf(f->cause, sizeof f->cause, "%s", f->n_causes ? f->causes[0].text : f->sig->meaning);
    /* the first cause whose keys hold and whose every placeholder has a value */
    for (size_t i = 0; i < f->sig->n_causes; i++) {
        char text[sizeof f->cause];
        if (all_true(&v, f->sig->causes[i].when, f->sig->causes[i].n_when) &&
            fill(&v, f->sig->causes[i].text, text, sizeof text, NULL, NULL)) {
            snprintf(f->cause, sizeof f->cause, "%s", text);
            break;
        }
    }
    /* A note or command a value is missing from is left out; for a command, a note says why. */
    const char *missing;
    size_t missing_len;
    f->n_fix = f->n_notes = 0;
    for (size_t i = 0; i < f->sig->n_notes; i++)
        if (fill(&v, f->sig->notes[i], f->notes[f->n_notes], sizeof f->notes[0], NULL, NULL))
            f->n_notes++;
    for (size_t i = 0; i < f->sig->n_fix; i++) {
        if (fill(&v, f->sig->fix[i], f->fix[f->n_fix], sizeof f->fix[0], &missing, &missing_len))
            f->n_fix++;
        else
            note_missing(&v, f, missing, missing_len);
    }
    if (f->tied_with && f->n_notes < MD_SIG_MAX_ITEMS)
        snprintf(f->notes[f->n_notes++], sizeof f->notes[0],
                 "Ambiguous: nothing in the log%s decides between %s and %s, which score the same; the fixes "
                 "are %s's, and if they do not help, see %s (msda-doctor diagnose --list).",
                 v.m ? " or on this machine" : "", f->sig->id, f->tied_with->id, f->sig->id, f->tied_with->id);
}

bool md_probe_raises(const md_diagnosis *d, const md_signature *sig)
{
    if (sig->n_probe_when == 0)
        return false;
    md_view v = { .d = d, .m = d->machine };
    return all_true(&v, sig->probe_when, sig->n_probe_when);
}
