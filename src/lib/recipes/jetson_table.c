#include "jetson_table.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes.h"
#include "base/regex_syntax.h"

typedef struct {
    char contains[64];
    const md_jetson_module *module;
} model_rule;

/* Everything one load takes, so that a failed load frees it in one place. */
typedef struct {
    regex_t release_re;
    bool have_re;
    md_jetson_release *releases;
    size_t n_releases;
    md_jetson_family *families;
    size_t n_families;
    md_jetson_module *modules;
    size_t n_modules;
    model_rule *rules;
    size_t n_rules;
} jetson_table;

static jetson_table *table;

static void table_free(jetson_table *t)
{
    if (!t)
        return;
    if (t->have_re)
        regfree(&t->release_re);
    free(t->releases);
    free(t->families);
    free(t->modules);
    free(t->rules);
    free(t);
}

/* KEY of OBJ into OUT: a non-empty string that fits, else false. */
static bool text(json_t *obj, const char *key, char *out, size_t size)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= size)
        return false;
    snprintf(out, size, "%s", json_string_value(v));
    return true;
}

static unsigned positive(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 1 << 24)
        return 0;
    return (unsigned)json_integer_value(v);
}

/* A calloc'd array as long as the array KEY of DOC, which must not be empty. */
static void *array_of(json_t *doc, const char *key, size_t item_size, size_t *count, md_error *err)
{
    json_t *list = json_object_get(doc, key);
    *count = 0;
    if (!json_is_array(list) || json_array_size(list) == 0) {
        md_fail(err, MD_ERR_INTERNAL, "jetson.json: missing '%s'", key);
        return NULL;
    }
    void *items = calloc(json_array_size(list), item_size);
    if (!items)
        md_fail(err, MD_ERR_NOMEM, "out of memory");
    else
        *count = json_array_size(list);
    return items;
}

static md_status read_releases(json_t *doc, jetson_table *t, md_error *err)
{
    if (!(t->releases = array_of(doc, "releases", sizeof *t->releases, &t->n_releases, err)))
        return err->code;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "releases"), i, r) {
        md_jetson_release *o = &t->releases[i];
        if (!text(r, "l4t", o->l4t, sizeof o->l4t) || !text(r, "jetpack", o->jetpack, sizeof o->jetpack) ||
            !text(r, "cuda", o->cuda, sizeof o->cuda))
            return md_fail(err, MD_ERR_INTERNAL, "jetson.json: release %zu%s%s: needs l4t, jetpack and cuda", i,
                           o->l4t[0] ? " L4T " : "", o->l4t);
        /* the rest are informative: kept when present */
        text(r, "ubuntu", o->ubuntu, sizeof o->ubuntu);
        text(r, "glibc", o->glibc, sizeof o->glibc);
        text(r, "cudnn", o->cudnn, sizeof o->cudnn);
    }
    if (!(t->families = array_of(doc, "families", sizeof *t->families, &t->n_families, err)))
        return err->code;
    json_array_foreach(json_object_get(doc, "families"), i, r) {
        md_jetson_family *o = &t->families[i];
        o->l4t_major = positive(r, "l4t_major");
        if (!o->l4t_major || !text(r, "jetpack", o->jetpack, sizeof o->jetpack) ||
            !text(r, "cuda", o->cuda, sizeof o->cuda))
            return md_fail(err, MD_ERR_INTERNAL, "jetson.json: family %zu: needs l4t_major, jetpack and cuda", i);
    }
    return MD_OK;
}

static md_status read_modules(json_t *doc, jetson_table *t, md_error *err)
{
    if (!(t->modules = array_of(doc, "modules", sizeof *t->modules, &t->n_modules, err)))
        return err->code;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "modules"), i, r) {
        md_jetson_module *o = &t->modules[i];
        char cc[8] = "";
        unsigned major = 0, minor = 0;
        int used = 0;
        if (!text(r, "id", o->id, sizeof o->id) || !text(r, "name", o->name, sizeof o->name))
            return md_fail(err, MD_ERR_INTERNAL, "jetson.json: module %zu: needs id and name", i);
        if (!text(r, "cc", cc, sizeof cc) || sscanf(cc, "%2u.%1u%n", &major, &minor, &used) != 2 || cc[used])
            return md_fail(err, MD_ERR_INTERNAL, "jetson.json: module %s: 'cc' is not MAJOR.MINOR", o->id);
        o->sm = major * 10 + minor;
        o->registers_per_block = positive(r, "regs_per_block");
        if (!o->registers_per_block)
            return md_fail(err, MD_ERR_INTERNAL, "jetson.json: module %s: bad regs_per_block", o->id);
        o->sms = positive(r, "sms");
        text(r, "soc", o->soc, sizeof o->soc);
        text(r, "max_jetpack", o->max_jetpack, sizeof o->max_jetpack);
    }
    if (!(t->rules = array_of(doc, "model_rules", sizeof *t->rules, &t->n_rules, err)))
        return err->code;
    json_array_foreach(json_object_get(doc, "model_rules"), i, r) {
        model_rule *o = &t->rules[i];
        char id[24] = "";
        if (!text(r, "contains", o->contains, sizeof o->contains) || !text(r, "module", id, sizeof id))
            return md_fail(err, MD_ERR_INTERNAL, "jetson.json: model rule %zu: needs contains and module", i);
        for (size_t k = 0; k < t->n_modules && !o->module; k++)
            if (strcmp(t->modules[k].id, id) == 0)
                o->module = &t->modules[k];
        if (!o->module)
            return md_fail(err, MD_ERR_INTERNAL, "jetson.json: model rule '%s' names no module '%s'", o->contains, id);
    }
    return MD_OK;
}

md_status md_jetson_table_load_json(json_t *doc, md_error *err)
{
    md_jetson_table_free();
    jetson_table *t = calloc(1, sizeof *t);
    if (!t)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    md_status st = MD_OK;
    const char *pattern = json_string_value(json_object_get(json_object_get(doc, "release_file"), "pattern"));
    if (!pattern || !*pattern) {
        st = md_fail(err, MD_ERR_INTERNAL, "jetson.json: release_file.pattern is missing");
        goto end;
    }
    if ((st = md_regex_compile(&t->release_re, pattern, REG_EXTENDED | REG_NEWLINE, MD_ERR_INTERNAL,
                               "jetson.json: release_file.pattern", err)) != MD_OK)
        goto end;
    t->have_re = true;
    /* md_jetson_l4t_parse reads three groups */
    if (t->release_re.re_nsub < 3) {
        st = md_fail(err, MD_ERR_INTERNAL, "jetson.json: release_file.pattern has fewer than 3 groups");
        goto end;
    }
    if ((st = read_releases(doc, t, err)) != MD_OK || (st = read_modules(doc, t, err)) != MD_OK)
        goto end;
    table = t;
end:
    if (st != MD_OK)
        table_free(t);
    return st;
}

md_status md_jetson_table_load(md_error *err)
{
    return table ? MD_OK : md_recipe_parse("jetson.json", md_jetson_table_load_json, err);
}

void md_jetson_table_free(void)
{
    table_free(table);
    table = NULL;
}

bool md_jetson_l4t_parse(const char *release_text, char *l4t, size_t size)
{
    regmatch_t g[4];
    if (!table || regexec(&table->release_re, release_text, 4, g, 0) != 0)
        return false;
    snprintf(l4t, size, "%.*s.%.*s.%.*s", (int)(g[1].rm_eo - g[1].rm_so), release_text + g[1].rm_so,
             (int)(g[2].rm_eo - g[2].rm_so), release_text + g[2].rm_so, (int)(g[3].rm_eo - g[3].rm_so),
             release_text + g[3].rm_so);
    return true;
}

const md_jetson_release *md_jetson_release_find(const char *l4t)
{
    for (size_t i = 0; table && i < table->n_releases; i++)
        if (strcmp(table->releases[i].l4t, l4t) == 0)
            return &table->releases[i];
    return NULL;
}

const md_jetson_family *md_jetson_family_find(unsigned major)
{
    for (size_t i = 0; table && i < table->n_families; i++)
        if (table->families[i].l4t_major == major)
            return &table->families[i];
    return NULL;
}

const md_jetson_module *md_jetson_module_find(const char *id)
{
    for (size_t i = 0; table && i < table->n_modules; i++)
        if (strcmp(table->modules[i].id, id) == 0)
            return &table->modules[i];
    return NULL;
}

const md_jetson_module *md_jetson_module_for_model(const char *model)
{
    for (size_t i = 0; table && i < table->n_rules; i++)
        if (strstr(model, table->rules[i].contains))
            return table->rules[i].module;
    return NULL;
}
