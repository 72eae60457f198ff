#include "knowledge.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "recipes.h"

/* Copies a JSON array of strings into OUT; false when it is not one or holds too many. */
static bool string_list(json_t *arr, const char **out, size_t *n)
{
    *n = 0;
    if (!json_is_array(arr) || json_array_size(arr) > MD_SIG_MAX_ITEMS)
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

md_status md_knowledge_load(md_knowledge *kb, md_error *err)
{
    memset(kb, 0, sizeof *kb);
    json_t *doc = md_recipe_load("signatures.json", err);
    if (!doc)
        return err ? err->code : MD_ERR_INTERNAL;
    md_status st = md_knowledge_load_json(kb, doc, err);
    json_decref(doc);
    return st;
}

md_status md_knowledge_load_json(md_knowledge *kb, json_t *doc, md_error *err)
{
    memset(kb, 0, sizeof *kb);
    kb->doc = json_incref(doc);
    json_t *list = json_object_get(doc, "signatures");
    size_t n = json_array_size(list);
    kb->sigs = calloc(n ? n : 1, sizeof *kb->sigs);
    if (!kb->sigs) {
        md_knowledge_free(kb);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    size_t total_patterns = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(list, i);
        md_signature *s = &kb->sigs[i];
        s->id = json_string_value(json_object_get(e, "id"));
        s->severity = json_string_value(json_object_get(e, "severity"));
        s->title = json_string_value(json_object_get(e, "title"));
        s->meaning = json_string_value(json_object_get(e, "meaning"));
        json_t *rank = json_object_get(e, "root_rank");
        if (!s->id || !s->severity || !s->title || !s->meaning || !json_is_integer(rank) ||
            !string_list(json_object_get(e, "patterns"), s->patterns, &s->n_patterns) || s->n_patterns == 0 ||
            !string_list(json_object_get(e, "confirm"), s->confirm, &s->n_confirm) ||
            !string_list(json_object_get(e, "rule_out"), s->rule_out, &s->n_rule_out) ||
            !string_list(json_object_get(e, "fix"), s->fix, &s->n_fix) ||
            !string_list(json_object_get(e, "notes"), s->notes, &s->n_notes)) {
            /* the message first: freeing KB frees S, and the id is in the document it holds */
            md_status st = md_fail(err, MD_ERR_INTERNAL, "signatures.json: entry %zu (%s) is malformed", i,
                                   s->id ? s->id : "no id");
            md_knowledge_free(kb);
            return st;
        }
        s->root_rank = (int)json_integer_value(rank);
        total_patterns += s->n_patterns;
        kb->count++;
    }
    const char **pats = calloc(total_patterns ? total_patterns : 1, sizeof *pats);
    size_t *groups = calloc(total_patterns ? total_patterns : 1, sizeof *groups);
    md_status st = MD_OK;
    if (!pats || !groups) {
        st = md_fail(err, MD_ERR_NOMEM, "out of memory");
    } else {
        size_t k = 0;
        for (size_t i = 0; i < kb->count; i++)
            for (size_t p = 0; p < kb->sigs[i].n_patterns; p++) {
                pats[k] = kb->sigs[i].patterns[p];
                groups[k++] = i;
            }
        st = md_log_matcher_init(&kb->matcher, pats, groups, total_patterns, kb->count, err);
    }
    free(pats);
    free(groups);
    if (st != MD_OK)
        md_knowledge_free(kb);
    return st;
}

void md_knowledge_free(md_knowledge *kb)
{
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
