#include "redist_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes.h"

static md_redist_table *table;

/* Copies a non-empty string field that fits; false otherwise. */
static bool copy_string(json_t *v, char *out, size_t size)
{
    const char *s = json_string_value(v);
    if (!s || !*s || strlen(s) >= size)
        return false;
    snprintf(out, size, "%s", s);
    return true;
}

static md_status load_wheel_major(json_t *item, size_t i, md_wheel_major *m, md_error *err)
{
    json_t *major = json_object_get(item, "major"), *list = json_object_get(item, "packages"), *pkg;
    if (!json_is_integer(major) || json_integer_value(major) < 1 || json_integer_value(major) > 99)
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: wheels major %zu has no 'major'", i);
    m->major = (unsigned)json_integer_value(major);
    if (json_object_get(item, "refused")) {
        if (!copy_string(json_object_get(item, "refused"), m->refused, sizeof m->refused) || list)
            return md_fail(err, MD_ERR_INTERNAL, "redist.json: wheels major %u: bad 'refused'", m->major);
        return MD_OK;
    }
    if (!copy_string(json_object_get(item, "root"), m->root, sizeof m->root) || !json_is_array(list) ||
        json_array_size(list) == 0 || json_array_size(list) > MD_WHEEL_MAX_PACKAGES)
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: wheels major %u needs 'root' and 'packages'", m->major);
    size_t k;
    json_array_foreach(list, k, pkg) {
        md_wheel_package *p = &m->packages[k];
        json_t *same = json_object_get(pkg, "same_version_as");
        if (!copy_string(json_object_get(pkg, "name"), p->name, sizeof p->name) ||
            (same && !copy_string(same, p->same_version_as, sizeof p->same_version_as)))
            return md_fail(err, MD_ERR_INTERNAL, "redist.json: wheels major %u: package %zu is malformed", m->major, k);
    }
    m->n_packages = json_array_size(list);
    /* The first package is the one that holds nvcc; a pin must name an earlier package. */
    for (k = 0; k < m->n_packages; k++) {
        bool found = !m->packages[k].same_version_as[0];
        for (size_t j = 0; j < k && !found; j++)
            found = strcmp(m->packages[j].name, m->packages[k].same_version_as) == 0;
        if (!found)
            return md_fail(err, MD_ERR_INTERNAL, "redist.json: wheels major %u: '%s' pins to no earlier package",
                           m->major, m->packages[k].name);
    }
    return MD_OK;
}

/* The optional "wheels" object: the second source of `fetch`. */
static md_status load_wheels(json_t *w, md_redist_table *out, md_error *err)
{
    if (!w)
        return MD_OK;
    if (!copy_string(json_object_get(w, "index_url"), out->index_url, sizeof out->index_url) ||
        out->index_url[strlen(out->index_url) - 1] == '/')
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: bad wheels 'index_url'");
    json_t *plats = json_object_get(w, "platforms"), *value, *list = json_object_get(w, "majors"), *item;
    const char *key;
    if (!json_is_object(plats) || json_object_size(plats) > MD_REDIST_MAX_PLATFORMS)
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: bad wheels 'platforms'");
    json_object_foreach(plats, key, value) {
        size_t h = out->n_wheel_platforms;
        if (!md_redist_platform_known(out, key) ||
            !copy_string(value, out->wheel_machine[h], sizeof out->wheel_machine[h]))
            return md_fail(err, MD_ERR_INTERNAL, "redist.json: wheels platform '%s' is not a known one", key);
        snprintf(out->wheel_platform[h], sizeof out->wheel_platform[h], "%s", key);
        out->n_wheel_platforms++;
    }
    size_t i;
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > MD_WHEEL_MAX_MAJORS)
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: bad wheels 'majors'");
    json_array_foreach(list, i, item) {
        md_status st = load_wheel_major(item, i, &out->wheel_majors[i], err);
        if (st != MD_OK)
            return st;
    }
    out->n_wheel_majors = json_array_size(list);
    return MD_OK;
}

md_status md_redist_table_load_json(json_t *doc, md_redist_table *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    if (!copy_string(json_object_get(doc, "base_url"), out->base_url, sizeof out->base_url))
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: bad 'base_url'");
    size_t len = strlen(out->base_url);
    /* Archive URLs are base "/" relative_path: a trailing slash would double it. */
    if (out->base_url[len - 1] == '/')
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: 'base_url' ends with '/'");

    json_t *list = json_object_get(doc, "platforms"), *item;
    size_t i;
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > MD_REDIST_MAX_PLATFORMS)
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: bad 'platforms'");
    json_array_foreach(list, i, item) {
        if (!copy_string(item, out->platforms[i], sizeof out->platforms[i]))
            return md_fail(err, MD_ERR_INTERNAL, "redist.json: platform %zu is not a short string", i);
    }
    out->n_platforms = json_array_size(list);

    json_t *hosts = json_object_get(doc, "host_platforms"), *value;
    const char *key;
    if (!json_is_object(hosts) || json_object_size(hosts) > MD_REDIST_MAX_PLATFORMS)
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: bad 'host_platforms'");
    json_object_foreach(hosts, key, value) {
        size_t h = out->n_hosts, k;
        if (strlen(key) >= sizeof out->host_machine[h] || !json_is_array(value) || json_array_size(value) == 0 ||
            json_array_size(value) > MD_REDIST_MAX_PLATFORMS)
            return md_fail(err, MD_ERR_INTERNAL, "redist.json: host_platforms '%s' is not a list of platforms", key);
        json_array_foreach(value, k, item) {
            char *p = out->host_platforms[h][k];
            if (!copy_string(item, p, sizeof out->host_platforms[h][k]) || !md_redist_platform_known(out, p))
                return md_fail(err, MD_ERR_INTERNAL, "redist.json: host_platforms '%s' names no known platform",
                               key);
        }
        out->n_host_platforms[h] = json_array_size(value);
        snprintf(out->host_machine[h], sizeof out->host_machine[h], "%s", key);
        out->n_hosts++;
    }

    list = json_object_get(doc, "components");
    if (!json_is_array(list) || json_array_size(list) == 0 || json_array_size(list) > MD_REDIST_MAX_COMPONENTS)
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: bad 'components'");
    bool any_required = false;
    json_array_foreach(list, i, item) {
        md_redist_component *c = &out->components[i];
        json_t *req = json_object_get(item, "required");
        if (!copy_string(json_object_get(item, "name"), c->name, sizeof c->name) || !json_is_boolean(req))
            return md_fail(err, MD_ERR_INTERNAL, "redist.json: component %zu needs 'name' and 'required'", i);
        c->required = json_is_true(req);
        any_required = any_required || c->required;
    }
    out->n_components = json_array_size(list);
    if (!any_required)
        return md_fail(err, MD_ERR_INTERNAL, "redist.json: no component is required");
    return load_wheels(json_object_get(doc, "wheels"), out, err);
}

const md_redist_table *md_redist_table_get(md_error *err)
{
    if (table)
        return table;
    json_t *doc = md_recipe_load("redist.json", err);
    if (!doc)
        return NULL;
    md_redist_table *t = malloc(sizeof *t);
    if (!t) {
        json_decref(doc);
        md_fail(err, MD_ERR_NOMEM, "out of memory");
        return NULL;
    }
    md_status st = md_redist_table_load_json(doc, t, err);
    json_decref(doc);
    if (st != MD_OK) {
        free(t);
        return NULL;
    }
    table = t;
    return table;
}

void md_redist_table_free(void)
{
    free(table);
    table = NULL;
}

bool md_redist_platform_known(const md_redist_table *t, const char *name)
{
    for (size_t i = 0; i < t->n_platforms; i++)
        if (strcmp(t->platforms[i], name) == 0)
            return true;
    return false;
}

void md_redist_platform_names(const md_redist_table *t, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < t->n_platforms && used < size; i++) {
        const char *sep = i == 0 ? "" : i + 1 == t->n_platforms ? " or " : ", ";
        int n = snprintf(out + used, size - used, "%s%s", sep, t->platforms[i]);
        used += n > 0 ? (size_t)n : 0;
    }
}

const char *md_redist_host_platform(const md_redist_table *t, const char *machine)
{
    for (size_t i = 0; i < t->n_hosts; i++)
        if (strcmp(t->host_machine[i], machine) == 0)
            return t->host_platforms[i][0];
    return NULL;
}

int md_redist_host_rank(const md_redist_table *t, const char *machine, const char *platform)
{
    for (size_t i = 0; i < t->n_hosts; i++)
        for (size_t k = 0; k < t->n_host_platforms[i] && strcmp(t->host_machine[i], machine) == 0; k++)
            if (strcmp(t->host_platforms[i][k], platform) == 0)
                return (int)k;
    return -1;
}

const md_wheel_major *md_redist_wheel_major(const md_redist_table *t, unsigned major)
{
    for (size_t i = 0; i < t->n_wheel_majors; i++)
        if (t->wheel_majors[i].major == major)
            return &t->wheel_majors[i];
    return NULL;
}

const char *md_redist_wheel_machine(const md_redist_table *t, const char *platform)
{
    for (size_t i = 0; i < t->n_wheel_platforms; i++)
        if (strcmp(t->wheel_platform[i], platform) == 0)
            return t->wheel_machine[i];
    return NULL;
}
