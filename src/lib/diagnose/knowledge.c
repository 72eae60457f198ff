#include "knowledge.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/regex_syntax.h"
#include "recipes/recipes.h"

/* Copies a JSON array of strings into OUT (at most CAP); false when it is not one or holds too
 * many. A missing (NULL) array is empty when OPTIONAL. */
static bool string_list_cap(json_t *arr, const char **out, size_t *n, size_t cap, bool optional)
{
    *n = 0;
    if (!arr && optional)
        return true;
    if (!json_is_array(arr) || json_array_size(arr) > cap)
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_string(v))
            return false;
        out[(*n)++] = json_string_value(v);
    }
    return true;
}

static bool string_list(json_t *arr, const char **out, size_t *n, bool optional)
{
    return string_list_cap(arr, out, n, MD_SIG_MAX_ITEMS, optional);
}

/* A capture's patterns: strings (group 1) or {"re": ..., "group": N}. */
static bool capture_spec(const char *name, json_t *arr, md_capture_spec *c)
{
    memset(c, 0, sizeof *c);
    c->name = name;
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > MD_SIG_MAX_ITEMS)
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (json_is_string(v)) {
            c->re[c->n] = json_string_value(v);
            c->group[c->n++] = 1;
        } else if (json_is_object(v) && json_is_string(json_object_get(v, "re")) &&
                   json_is_integer(json_object_get(v, "group"))) {
            json_int_t g = json_integer_value(json_object_get(v, "group"));
            if (g < 0 || g > 9)
                return false;
            c->re[c->n] = json_string_value(json_object_get(v, "re"));
            c->group[c->n++] = (int)g;
        } else {
            return false;
        }
    }
    return true;
}

static bool named_list(json_t *obj, md_named_patterns *out, size_t *n)
{
    *n = 0;
    if (!obj)
        return true;
    if (!json_is_object(obj) || json_object_size(obj) > MD_KB_MAX_NAMED)
        return false;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!capture_spec(key, v, &out[*n].spec))
            return false;
        (*n)++;
    }
    return true;
}

static bool parse_signature(json_t *e, md_signature *s)
{
    s->id = json_string_value(json_object_get(e, "id"));
    s->severity = json_string_value(json_object_get(e, "severity"));
    s->title = json_string_value(json_object_get(e, "title"));
    s->meaning = json_string_value(json_object_get(e, "meaning"));
    json_t *rank = json_object_get(e, "root_rank");
    if (!s->id || !s->severity || !s->title || !s->meaning || !json_is_integer(rank) ||
        !string_list(json_object_get(e, "patterns"), s->patterns, &s->n_patterns, false) || s->n_patterns == 0 ||
        !string_list(json_object_get(e, "confirm"), s->confirm, &s->n_confirm, false) ||
        !string_list(json_object_get(e, "rule_out"), s->rule_out, &s->n_rule_out, false) ||
        !string_list(json_object_get(e, "fix"), s->fix, &s->n_fix, false) ||
        !string_list(json_object_get(e, "notes"), s->notes, &s->n_notes, false) ||
        !string_list(json_object_get(e, "gpu"), s->gpu, &s->n_gpu, true) ||
        !string_list(json_object_get(e, "evidence"), s->evidence, &s->n_evidence, true) ||
        !string_list(json_object_get(e, "probe_when"), s->probe_when, &s->n_probe_when, true))
        return false;
    s->root_rank = (int)json_integer_value(rank);
    json_t *caps = json_object_get(e, "captures");
    if (caps) {
        if (!json_is_object(caps) || json_object_size(caps) > MD_SIG_MAX_CAPTURES)
            return false;
        const char *key;
        json_t *v;
        json_object_foreach(caps, key, v) {
            if (!capture_spec(key, v, &s->captures[s->n_captures++]))
                return false;
        }
    }
    json_t *causes = json_object_get(e, "causes");
    if (causes) {
        if (!json_is_array(causes) || json_array_size(causes) > MD_SIG_MAX_CAUSES)
            return false;
        size_t i;
        json_t *c;
        json_array_foreach(causes, i, c) {
            md_cause_spec *cs = &s->causes[s->n_causes++];
            cs->text = json_string_value(json_object_get(c, "text"));
            if (!cs->text || !string_list(json_object_get(c, "when"), cs->when, &cs->n_when, false))
                return false;
        }
    }
    json_t *readings = json_object_get(e, "readings");
    if (readings) {
        if (!json_is_array(readings) || json_array_size(readings) > MD_SIG_MAX_READINGS)
            return false;
        size_t i;
        json_t *r;
        json_array_foreach(readings, i, r) {
            md_reading *rd = &s->readings[s->n_readings++];
            json_t *causes_r = json_object_get(r, "causes");
            if (!string_list(json_object_get(r, "patterns"), rd->patterns, &rd->n_patterns, true) ||
                !json_is_array(causes_r) || json_array_size(causes_r) < 2 ||
                json_array_size(causes_r) > MD_SIG_MAX_CAUSES)
                return false;
            size_t k;
            json_t *c;
            json_array_foreach(causes_r, k, c) {
                md_reading_cause *rc = &rd->causes[rd->n_causes++];
                rc->text = json_string_value(json_object_get(c, "text"));
                const char *finding = json_string_value(json_object_get(c, "finding"));
                if (!rc->text || !finding || !string_list(json_object_get(c, "for"), rc->pro, &rc->n_pro, false) ||
                    !string_list(json_object_get(c, "against"), rc->con, &rc->n_con, false))
                    return false;
                rc->finding_id = finding; /* resolved once every signature is read (resolve_names) */
            }
        }
    }
    return true;
}

/* ---- names resolved: IDs unique, each reading's finding found ------------------------------- */

static md_status resolve_names(md_knowledge *kb, md_error *err)
{
    for (size_t i = 0; i < kb->count; i++) {
        md_signature *s = &kb->sigs[i];
        for (size_t k = 0; k < i; k++)
            if (strcmp(kb->sigs[k].id, s->id) == 0)
                return md_fail(err, MD_ERR_INTERNAL, "signatures.json: the ID '%s' is given twice", s->id);
        for (size_t r = 0; r < s->n_readings; r++)
            for (size_t c = 0; c < s->readings[r].n_causes; c++) {
                md_reading_cause *rc = &s->readings[r].causes[c];
                const md_signature *target = md_knowledge_find(kb, rc->finding_id);
                if (!target)
                    return md_fail(err, MD_ERR_INTERNAL, "signatures.json: %s reads its message as '%s', which is no "
                                   "finding ID", s->id, rc->finding_id);
                rc->finding = (size_t)(target - kb->sigs);
            }
    }
    return MD_OK;
}

/* ---- the matcher: every pattern of the data, one group per purpose -------------------------- */

typedef struct {
    const char **pats;
    size_t *groups;
    size_t n, cap;
} pattern_list;

static bool add_pattern(pattern_list *l, const char *re, size_t group)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        const char **p = realloc(l->pats, cap * sizeof *p);
        if (!p)
            return false;
        l->pats = p;
        size_t *g = realloc(l->groups, cap * sizeof *g);
        if (!g)
            return false;
        l->groups = g;
        l->cap = cap;
    }
    l->pats[l->n] = re;
    l->groups[l->n++] = group;
    return true;
}

/* Each capture is compiled here, once: one that would not compile, or would expand without
 * bound, is refused with the file, and the finding filler and the log-fact reader use the
 * compiled expressions (md_knowledge_free frees them). */
static md_status compile_spec(md_capture_spec *spec, const char *owner, md_error *err)
{
    char what[160];
    snprintf(what, sizeof what, "signatures.json: %s, capture '%s'", owner, spec->name);
    for (size_t p = 0; p < spec->n; p++) {
        md_status st = md_regex_compile(&spec->compiled[p], spec->re[p], REG_EXTENDED, MD_ERR_INTERNAL, what, err);
        if (st != MD_OK)
            return st;
        spec->n_compiled++;
    }
    return MD_OK;
}

static md_status compile_captures(md_knowledge *kb, md_error *err)
{
    md_status st = MD_OK;
    for (size_t i = 0; i < kb->count && st == MD_OK; i++)
        for (size_t c = 0; c < kb->sigs[i].n_captures && st == MD_OK; c++)
            st = compile_spec(&kb->sigs[i].captures[c], kb->sigs[i].id, err);
    for (size_t i = 0; i < kb->n_log_facts && st == MD_OK; i++)
        st = compile_spec(&kb->log_facts[i].spec, "log_facts", err);
    return st;
}

static void free_spec(md_capture_spec *spec)
{
    for (size_t p = 0; p < spec->n_compiled; p++)
        regfree(&spec->compiled[p]);
    spec->n_compiled = 0;
}

/* log_translations: the catalogues' translated texts the lines are normalised with (lognorm.h). */
static md_status load_translations(md_knowledge *kb, md_error *err)
{
    json_t *list = json_object_get(kb->doc, "log_translations");
    if (list && !json_is_array(list))
        return md_fail(err, MD_ERR_INTERNAL, "signatures.json: log_translations is malformed");
    size_t n = json_array_size(list);
    const char **from = calloc(n ? n : 1, sizeof *from), **to = calloc(n ? n : 1, sizeof *to);
    md_status st = from && to ? MD_OK : md_fail(err, MD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n && st == MD_OK; i++) {
        json_t *e = json_array_get(list, i);
        from[i] = json_string_value(json_object_get(e, "text"));
        to[i] = json_string_value(json_object_get(e, "english"));
        if (!from[i] || !to[i] || !json_is_string(json_object_get(e, "catalogue")))
            st = md_fail(err, MD_ERR_INTERNAL, "signatures.json: log_translations entry %zu is malformed", i);
    }
    if (st == MD_OK) {
        md_log_wording_free(&kb->matcher.wording);
        st = md_log_wording_init(&kb->matcher.wording, from, to, n, err);
    }
    free(from);
    free(to);
    return st;
}

static md_status build_matcher(md_knowledge *kb, md_error *err)
{
    pattern_list l = { 0 };
    bool ok = true;
    size_t group = kb->count;
    for (size_t i = 0; i < kb->count && ok; i++) {
        md_signature *s = &kb->sigs[i];
        for (size_t p = 0; p < s->n_patterns && ok; p++)
            ok = add_pattern(&l, s->patterns[p], i);
        for (size_t r = 0; r < s->n_readings && ok; r++) {
            if (s->readings[r].n_patterns == 0)
                continue;
            s->readings[r].group = group++;
            for (size_t p = 0; p < s->readings[r].n_patterns && ok; p++)
                ok = add_pattern(&l, s->readings[r].patterns[p], s->readings[r].group);
        }
    }
    md_named_patterns *sets[2] = { kb->log_facts, kb->hints };
    size_t counts[2] = { kb->n_log_facts, kb->n_hints };
    for (size_t k = 0; k < 2 && ok; k++)
        for (size_t i = 0; i < counts[k] && ok; i++) {
            sets[k][i].group = group++;
            for (size_t p = 0; p < sets[k][i].spec.n && ok; p++)
                ok = add_pattern(&l, sets[k][i].spec.re[p], sets[k][i].group);
        }
    kb->n_groups = group;
    md_status st = ok ? md_log_matcher_init(&kb->matcher, l.pats, l.groups, l.n, group, err)
                      : md_fail(err, MD_ERR_NOMEM, "out of memory");
    free(l.pats);
    free(l.groups);
    if (st == MD_OK)
        st = load_translations(kb, err);
    return st;
}

md_status md_knowledge_parse_doc(md_knowledge *kb, void *document, md_error *err)
{
    memset(kb, 0, sizeof *kb);
    json_t *doc = document;
    kb->doc = doc;
    json_t *list = json_object_get(doc, "signatures");
    size_t n = json_array_size(list);
    kb->sigs = calloc(n ? n : 1, sizeof *kb->sigs);
    if (!kb->sigs) {
        md_knowledge_free(kb);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        md_signature *s = &kb->sigs[i];
        if (!parse_signature(json_array_get(list, i), s)) {
            md_status st = md_fail(err, MD_ERR_INTERNAL, "signatures.json: entry %zu (%s) is malformed", i,
                                   s->id ? s->id : "no id");
            md_knowledge_free(kb);
            return st;
        }
        kb->count++;
    }
    if (!named_list(json_object_get(doc, "log_facts"), kb->log_facts, &kb->n_log_facts) ||
        !named_list(json_object_get(doc, "log_hints"), kb->hints, &kb->n_hints)) {
        md_knowledge_free(kb);
        return md_fail(err, MD_ERR_INTERNAL, "signatures.json: log_facts or log_hints is malformed");
    }
    md_status st = resolve_names(kb, err);
    if (st == MD_OK)
        st = compile_captures(kb, err);
    if (st == MD_OK)
        st = build_matcher(kb, err);
    if (st != MD_OK)
        md_knowledge_free(kb);
    return st;
}

md_status md_knowledge_parse(md_knowledge *kb, md_error *err)
{
    memset(kb, 0, sizeof *kb);
    json_t *doc = md_recipe_load("signatures.json", err);
    if (!doc)
        return err ? err->code : MD_ERR_INTERNAL;
    return md_knowledge_parse_doc(kb, doc, err);
}

void md_knowledge_free(md_knowledge *kb)
{
    for (size_t i = 0; kb->sigs && i < kb->count; i++)
        for (size_t c = 0; c < kb->sigs[i].n_captures; c++)
            free_spec(&kb->sigs[i].captures[c]);
    for (size_t i = 0; i < kb->n_log_facts; i++)
        free_spec(&kb->log_facts[i].spec);
    md_log_matcher_free(&kb->matcher);
    free(kb->sigs);
    json_decref((json_t *)kb->doc);
    memset(kb, 0, sizeof *kb);
}

const md_signature *md_knowledge_find(const md_knowledge *kb, const char *id)
{
    for (size_t i = 0; i < kb->count; i++)
        if (strcmp(kb->sigs[i].id, id) == 0)
            return &kb->sigs[i];
    return NULL;
}

const md_capture_spec *md_signature_capture(const md_signature *sig, const char *name)
{
    for (size_t i = 0; i < sig->n_captures; i++)
        if (strcmp(sig->captures[i].name, name) == 0)
            return &sig->captures[i];
    return NULL;
}

const md_named_patterns *md_knowledge_hint(const md_knowledge *kb, const char *name)
{
    for (size_t i = 0; i < kb->n_hints; i++)
        if (strcmp(kb->hints[i].spec.name, name) == 0)
            return &kb->hints[i];
    return NULL;
}
