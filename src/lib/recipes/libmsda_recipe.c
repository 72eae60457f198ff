#include "libmsda_recipe.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "base/strv.h"
#include "msda_kparams.h"

static const struct {
    const char *name;
    md_arch_fact fact;
    const char *when_key; /* the key of the value where the fact holds */
    bool is_value;        /* the fact is the knob's value: only "unknown" is read */
} FACTS[] = {
    { "none", MD_FACT_NONE, NULL, false },
    { "threads_at_max_registers", MD_FACT_THREADS_AT_MAX_REGISTERS, NULL, true },
    { "half_atomic_add", MD_FACT_HALF_ATOMIC_ADD, "yes", false },
    { "bf16", MD_FACT_BF16, "yes", false },
};

/* The words of a list of choices in the recipe ("ptx", "sass") and the bit each sets. */
typedef struct {
    const char *name;
    unsigned bit;
} choice_word;

static const choice_word PTX_CHOICES[] = {
    { "newest", MD_PTX_NEWEST },
    { "oldest_of_newest_toolkit", MD_PTX_OLDEST_OF_NEWEST },
};

static const choice_word SASS_CHOICES[] = {
    { "newest", MD_SASS_NEWEST },
    { "lowest_driver", MD_SASS_LOWEST_DRIVER },
};

/* DOC's list KEY of words from WORDS (N of them) as the OR of their bits into *BITS. */
static md_status read_choices(json_t *doc, const char *key, const choice_word *words, size_t n, const char *path,
                              unsigned *bits, md_error *err)
{
    json_t *list = json_object_get(doc, key), *item;
    size_t i;
    if (!json_is_array(list))
        return md_fail(err, MD_ERR_FORMAT, "%s: %s is not a list", path, key);
    json_array_foreach(list, i, item) {
        const char *choice = json_string_value(item);
        size_t c = 0;
        while (c < n && !(choice && strcmp(choice, words[c].name) == 0))
            c++;
        if (c == n) {
            char known[128] = "";
            for (size_t k = 0; k < n; k++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "", words[k].name);
            return md_fail(err, MD_ERR_FORMAT, "%s: unknown %s choice '%s' (%s)", path, key,
                           choice ? choice : "(not a string)", known);
        }
        *bits |= words[c].bit;
    }
    return MD_OK;
}

static md_status string_list(json_t *parent, const char *key, const char *where, char ***out, md_error *err)
{
    json_t *list = json_object_get(parent, key);
    if (!json_is_array(list))
        return md_fail(err, MD_ERR_FORMAT, "%s: '%s' is not a list", where, key);
    strv v = { 0 };
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        if (!json_is_string(item) || !json_string_value(item)[0]) {
            strv_free(v.items);
            return md_fail(err, MD_ERR_FORMAT, "%s: '%s' item %zu is not a non-empty string", where, key, i);
        }
        if (!strv_add(&v, "%s", json_string_value(item))) {
            strv_free(v.items);
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        }
    }
    if (!v.items && !(v.items = calloc(1, sizeof *v.items)))
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    *out = v.items;
    return MD_OK;
}

/* "old_driver_ptx": {"isa": "6.5", "sm": [53, ...]}, or absent for none. */
static md_status read_old_ptx(json_t *doc, const char *path, md_libmsda_recipe *out, md_error *err)
{
    json_t *spec = json_object_get(doc, "old_driver_ptx");
    if (!spec)
        return MD_OK;
    const char *isa = json_string_value(json_object_get(spec, "isa"));
    unsigned major, minor;
    int used = 0;
    json_t *sms = json_object_get(spec, "sm"), *item;
    if (!isa || sscanf(isa, "%2u.%1u%n", &major, &minor, &used) != 2 || isa[used] || major == 0 ||
        !json_is_array(sms) || json_array_size(sms) == 0 || json_array_size(sms) > MD_MAX_OLD_PTX)
        return md_fail(err, MD_ERR_FORMAT, "%s: old_driver_ptx needs an 'isa' (\"6.5\") and 1 to %d 'sm' numbers", path,
                       MD_MAX_OLD_PTX);
    out->old_ptx_isa = major * 10 + minor;
    size_t i;
    json_array_foreach(sms, i, item) {
        if (!json_is_integer(item) || json_integer_value(item) < 10 || json_integer_value(item) > 999)
            return md_fail(err, MD_ERR_FORMAT, "%s: old_driver_ptx sm item %zu is not an architecture number", path, i);
        out->old_ptx_sms[out->n_old_ptx_sms++] = (unsigned)json_integer_value(item);
    }
    return MD_OK;
}

/* same_ptx: {"13.0": [[80, 86, 87, 89], ...], ...}; optional. An architecture in two groups of
 * one toolkit would make the choice depend on the order, so it is refused. */
static md_status read_same_ptx(json_t *doc, const char *path, md_libmsda_recipe *out, md_error *err)
{
    json_t *spec = json_object_get(doc, "same_ptx"), *groups;
    if (!spec)
        return MD_OK;
    if (!json_is_object(spec))
        return md_fail(err, MD_ERR_FORMAT, "%s: same_ptx is not an object of toolkit versions", path);
    const char *version;
    json_object_foreach(spec, version, groups) {
        unsigned major, minor;
        int used = 0;
        if (sscanf(version, "%3u.%3u%n", &major, &minor, &used) != 2 || version[used] || !json_is_array(groups))
            return md_fail(err, MD_ERR_FORMAT, "%s: same_ptx '%s' is not a toolkit version (\"13.0\") with a list of groups",
                           path, version);
        size_t g;
        json_t *group;
        json_array_foreach(groups, g, group) {
            if (out->n_same_ptx == MD_MAX_PTX_GROUPS)
                return md_fail(err, MD_ERR_FORMAT, "%s: more than %d same_ptx groups", path, MD_MAX_PTX_GROUPS);
            if (!json_is_array(group) || json_array_size(group) < 2 || json_array_size(group) > MD_MAX_PTX_GROUP_SMS)
                return md_fail(err, MD_ERR_FORMAT, "%s: same_ptx '%s' group %zu needs 2 to %d architecture numbers", path,
                               version, g, MD_MAX_PTX_GROUP_SMS);
            md_ptx_group *pg = &out->same_ptx[out->n_same_ptx];
            *pg = (md_ptx_group){ .major = major, .minor = minor };
            size_t i;
            json_t *item;
            json_array_foreach(group, i, item) {
                long sm = json_is_integer(item) ? (long)json_integer_value(item) : 0;
                if (sm < 10 || sm > 999)
                    return md_fail(err, MD_ERR_FORMAT, "%s: same_ptx '%s' group %zu item %zu is not an architecture number",
                                   path, version, g, i);
                /* every group of this toolkit so far, this one included (the last, not yet counted) */
                for (size_t k = 0; k <= out->n_same_ptx; k++) {
                    const md_ptx_group *o = &out->same_ptx[k];
                    if (o->major != major || o->minor != minor)
                        continue;
                    for (size_t j = 0; j < o->n_sms; j++)
                        if (o->sms[j] == (unsigned)sm)
                            return md_fail(err, MD_ERR_FORMAT, "%s: same_ptx '%s' names %ld twice", path, version, sm);
                }
                pg->sms[pg->n_sms++] = (unsigned)sm;
            }
            out->n_same_ptx++;
        }
    }
    return MD_OK;
}

unsigned md_libmsda_ptx_arch(const md_libmsda_recipe *recipe, unsigned major, unsigned minor, unsigned sm)
{
    for (size_t g = 0; g < recipe->n_same_ptx; g++) {
        const md_ptx_group *pg = &recipe->same_ptx[g];
        if (pg->major != major || pg->minor != minor)
            continue;
        unsigned lowest = sm;
        bool member = false;
        for (size_t i = 0; i < pg->n_sms; i++) {
            member = member || pg->sms[i] == sm;
            lowest = pg->sms[i] < lowest ? pg->sms[i] : lowest;
        }
        if (member)
            return lowest;
    }
    return sm;
}

/* The kernel's own constants a knob's value may name instead of a number, so that the recipe
 * restates none of them (kernels/msda_kparams.h owns the values). */
static const struct {
    const char *name;
    long value;
} KERNEL_CONSTANTS[] = {
    { "MSDA_ATOMIC_NATIVE", MSDA_ATOMIC_NATIVE },
    { "MSDA_ATOMIC_CAS", MSDA_ATOMIC_CAS },
    { "MSDA_ATOMIC_F32_BUFFER", MSDA_ATOMIC_F32_BUFFER },
    { "MSDA_ATOMIC_MIXED", MSDA_ATOMIC_MIXED },
};

static bool integer_field(json_t *obj, const char *key, long *out)
{
    json_t *v = json_object_get(obj, key);
    if (json_is_string(v)) {
        for (size_t i = 0; i < sizeof KERNEL_CONSTANTS / sizeof KERNEL_CONSTANTS[0]; i++)
            if (strcmp(json_string_value(v), KERNEL_CONSTANTS[i].name) == 0) {
                *out = KERNEL_CONSTANTS[i].value;
                return true;
            }
        return false;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
        return false;
    *out = (long)json_integer_value(v);
    return true;
}

static md_status read_knob(const char *name, json_t *rule, const char *where, md_knob_rule *out, md_error *err)
{
    if (strlen(name) >= sizeof out->name || !json_is_object(rule))
        return md_fail(err, MD_ERR_FORMAT, "%s: per_arch '%s' is malformed", where, name);
    snprintf(out->name, sizeof out->name, "%s", name);
    const char *fact = json_string_value(json_object_get(rule, "fact"));
    size_t f = 0;
    while (f < sizeof FACTS / sizeof FACTS[0] && !(fact && strcmp(fact, FACTS[f].name) == 0))
        f++;
    if (f == sizeof FACTS / sizeof FACTS[0])
        return md_fail(err, MD_ERR_FORMAT, "%s: per_arch '%s' follows an unknown fact '%s'", where, name,
                       fact ? fact : "(none given)");
    out->fact = FACTS[f].fact;
    if (FACTS[f].is_value) {
        if (!integer_field(rule, "unknown", &out->unknown))
            return md_fail(err, MD_ERR_FORMAT, "%s: per_arch '%s' needs an integer value for 'unknown'", where, name);
        return MD_OK;
    }
    if (!integer_field(rule, "otherwise", &out->otherwise) || !integer_field(rule, "unknown", &out->unknown) ||
        (FACTS[f].when_key && !integer_field(rule, FACTS[f].when_key, &out->when_fact)))
        return md_fail(err, MD_ERR_FORMAT, "%s: per_arch '%s' needs integer values (or kernel constants) for 'otherwise', 'unknown'%s%s",
                       where, name, FACTS[f].when_key ? " and " : "", FACTS[f].when_key ? FACTS[f].when_key : "");
    if (!FACTS[f].when_key)
        out->when_fact = out->otherwise;
    return MD_OK;
}

md_status md_libmsda_recipe_load(const char *kernels_dir, md_libmsda_recipe *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", kernels_dir, MD_RECIPE_FILE);
    json_error_t jerr;
    errno = 0;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    /* jansson's lexer reports a failed allocation as a bad token: errno, cleared before, tells. */
    if (!doc && (json_error_code(&jerr) == json_error_out_of_memory || errno == ENOMEM))
        return md_fail(err, MD_ERR_NOMEM, "out of memory reading '%s'", path);
    if (!doc)
        return md_fail(err, jerr.line > 0 ? MD_ERR_FORMAT : MD_ERR_IO, "cannot read '%s': %s (line %d)", path,
                       jerr.text, jerr.line);
    md_status st = MD_OK;
    json_t *device = json_object_get(doc, "device"), *host = json_object_get(doc, "host");
    const char *source = json_string_value(json_object_get(device, "source"));
    const char *version_define = json_string_value(json_object_get(host, "version_define"));
    if (!source || !source[0] || strchr(source, '/') || strlen(source) >= sizeof out->device_source) {
        st = md_fail(err, MD_ERR_FORMAT, "%s: device.source must name a file in kernels/", path);
        goto end;
    }
    if (!version_define || !version_define[0] || strlen(version_define) >= sizeof out->version_define) {
        st = md_fail(err, MD_ERR_FORMAT, "%s: host.version_define must name a macro", path);
        goto end;
    }
    json_t *threads = json_object_get(device, "ptxas_threads");
    if (!json_is_integer(threads) || json_integer_value(threads) < 1 || json_integer_value(threads) > 64) {
        st = md_fail(err, MD_ERR_FORMAT, "%s: device.ptxas_threads must be an integer from 1 to 64", path);
        goto end;
    }
    out->ptxas_threads = (unsigned)json_integer_value(threads);
    json_t *parts = json_object_get(device, "parts");
    const char *part_define = json_string_value(json_object_get(device, "part_define"));
    if (!json_is_integer(parts) || json_integer_value(parts) < 1 || json_integer_value(parts) > MD_MAX_PARTS) {
        st = md_fail(err, MD_ERR_FORMAT, "%s: device.parts must be an integer from 1 to %d", path, MD_MAX_PARTS);
        goto end;
    }
    if (!part_define || !part_define[0] || strlen(part_define) >= sizeof out->part_define) {
        st = md_fail(err, MD_ERR_FORMAT, "%s: device.part_define must name a macro", path);
        goto end;
    }
    out->parts = (unsigned)json_integer_value(parts);
    snprintf(out->part_define, sizeof out->part_define, "%s", part_define);
    snprintf(out->device_source, sizeof out->device_source, "%s", source);
    snprintf(out->version_define, sizeof out->version_define, "%s", version_define);
    if ((st = string_list(device, "nvcc_flags", path, &out->nvcc_flags, err)) != MD_OK ||
        (st = string_list(host, "cflags", path, &out->host_cflags, err)) != MD_OK ||
        (st = string_list(host, "link_flags", path, &out->link_flags, err)) != MD_OK ||
        (st = string_list(host, "libs", path, &out->libs, err)) != MD_OK)
        goto end;

    json_t *per_arch = json_object_get(doc, "per_arch");
    if (!json_is_object(per_arch)) {
        st = md_fail(err, MD_ERR_FORMAT, "%s: per_arch is not an object", path);
        goto end;
    }
    const char *name;
    json_t *rule;
    json_object_foreach(per_arch, name, rule) {
        if (out->n_knobs == MD_MAX_KNOBS) {
            st = md_fail(err, MD_ERR_FORMAT, "%s: more than %d per_arch knobs", path, MD_MAX_KNOBS);
            goto end;
        }
        if ((st = read_knob(name, rule, path, &out->knobs[out->n_knobs++], err)) != MD_OK)
            goto end;
    }

    if ((st = read_choices(doc, "ptx", PTX_CHOICES, sizeof PTX_CHOICES / sizeof PTX_CHOICES[0], path, &out->ptx,
                           err)) != MD_OK ||
        (st = read_choices(doc, "sass", SASS_CHOICES, sizeof SASS_CHOICES / sizeof SASS_CHOICES[0], path, &out->sass,
                           err)) != MD_OK)
        goto end;
    if (!(out->sass & MD_SASS_NEWEST)) {
        st = md_fail(err, MD_ERR_FORMAT, "%s: sass must include 'newest'", path);
        goto end;
    }
    if ((st = read_old_ptx(doc, path, out, err)) != MD_OK || (st = read_same_ptx(doc, path, out, err)) != MD_OK)
        goto end;
    st = string_list(doc, "fatbin_compress_flags", path, &out->fatbin_compress_flags, err);
end:
    json_decref(doc);
    return st;
}

void md_libmsda_recipe_free(md_libmsda_recipe *recipe)
{
    strv_free(recipe->nvcc_flags);
    strv_free(recipe->host_cflags);
    strv_free(recipe->link_flags);
    strv_free(recipe->libs);
    strv_free(recipe->fatbin_compress_flags);
    memset(recipe, 0, sizeof *recipe);
}

long md_knob_value(const md_knob_rule *knob, const md_arch *arch)
{
    if (!arch)
        return knob->unknown;
    bool holds = false;
    switch (knob->fact) {
    case MD_FACT_NONE: holds = false; break;
    case MD_FACT_THREADS_AT_MAX_REGISTERS: return md_arch_threads_at_max_registers(arch->registers_per_block);
    case MD_FACT_HALF_ATOMIC_ADD: holds = arch->half_atomic_add; break;
    case MD_FACT_BF16: holds = arch->bf16; break;
    }
    return holds ? knob->when_fact : knob->otherwise;
}

const md_knob_rule *md_libmsda_knob(const md_libmsda_recipe *recipe, const char *name)
{
    for (size_t i = 0; i < recipe->n_knobs; i++)
        if (strcmp(recipe->knobs[i].name, name) == 0)
            return &recipe->knobs[i];
    return NULL;
}
