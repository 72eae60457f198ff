#include "toolkit_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes.h"

static md_toolkit_row *rows;
static unsigned row_count;

/* A positive integer field, or 0 when it is missing, not an integer or out of range. */
static unsigned positive(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 100000)
        return 0;
    return (unsigned)json_integer_value(v);
}

/* "X.Y" into X * 10 + Y, a single-digit minor: an ISA; 0 when malformed. */
static unsigned isa_value(const char *text)
{
    unsigned major, minor;
    int used = 0;
    if (!text || sscanf(text, "%2u.%1u%n", &major, &minor, &used) != 2 || text[used] != '\0' || major == 0)
        return 0;
    return major * 10 + minor;
}

/* Digits at *P as a number not over MAX, advancing *P; false when none or too large. */
static bool take_number(const char **p, unsigned max, unsigned *out)
{
    unsigned v = 0;
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return false;
    while (*s >= '0' && *s <= '9') {
        v = v * 10 + (unsigned)(*s++ - '0');
        if (v > max)
            return false;
    }
    *p = s;
    *out = v;
    return true;
}

int md_cuda_version_parse(const char *text)
{
    unsigned major, minor, patch;
    const char *p = text;
    if (!p || !take_number(&p, 999, &major) || major == 0 || *p++ != '.' || !take_number(&p, 99, &minor))
        return -1;
    if (*p == '.' && (++p, !take_number(&p, 99999, &patch)))
        return -1;
    return *p ? -1 : (int)(major * 1000 + minor * 10);
}

void md_cuda_version_text(int cuda, char *out, size_t size)
{
    if (cuda <= 0)
        snprintf(out, size, "unknown");
    else
        snprintf(out, size, "%d.%d", cuda / 1000, (cuda % 1000) / 10);
}

static md_status read_row(json_t *item, size_t i, md_toolkit_row *r, md_error *err)
{
    const char *version = json_string_value(json_object_get(item, "version"));
    const char *driver = json_string_value(json_object_get(item, "min_driver"));
    int used = 0;
    if (!version || sscanf(version, "%3u.%3u%n", &r->major, &r->minor, &used) != 2 || version[used] != '\0' ||
        (size_t)used >= sizeof r->version)
        return md_fail(err, MD_ERR_INTERNAL, "toolkits.json: entry %zu: 'version' is not MAJOR.MINOR", i);
    snprintf(r->version, sizeof r->version, "%s", version);
    r->sm_min = positive(item, "sm_min");
    r->sm_max = positive(item, "sm_max");
    r->max_gcc = positive(item, "max_gcc");
    if (!r->sm_min || r->sm_max < r->sm_min)
        return md_fail(err, MD_ERR_INTERNAL, "toolkits.json: entry %zu (CUDA %s): bad sm_min or sm_max", i, version);
    if (!r->max_gcc)
        return md_fail(err, MD_ERR_INTERNAL, "toolkits.json: entry %zu (CUDA %s): bad max_gcc", i, version);
    if (!driver || !*driver || strlen(driver) >= sizeof r->min_driver)
        return md_fail(err, MD_ERR_INTERNAL, "toolkits.json: entry %zu (CUDA %s): bad min_driver", i, version);
    snprintf(r->min_driver, sizeof r->min_driver, "%s", driver);
    json_t *release = json_object_get(item, "redist_release");
    const char *rs = json_string_value(release);
    unsigned rmaj, rmin, rpatch;
    used = 0;
    if (release && (!rs || sscanf(rs, "%3u.%3u.%3u%n", &rmaj, &rmin, &rpatch, &used) != 3 || rs[used] != '\0' ||
                    rmaj != r->major || rmin != r->minor || (size_t)used >= sizeof r->redist_release))
        return md_fail(err, MD_ERR_INTERNAL, "toolkits.json: entry %zu (CUDA %s): bad redist_release", i, version);
    snprintf(r->redist_release, sizeof r->redist_release, "%s", rs ? rs : "");
    r->ptx_isa = isa_value(json_string_value(json_object_get(item, "ptx_isa")));
    if (!r->ptx_isa)
        return md_fail(err, MD_ERR_INTERNAL, "toolkits.json: entry %zu (CUDA %s): bad ptx_isa", i, version);
    r->sass_needs_cuda = md_cuda_version_parse(json_string_value(json_object_get(item, "sass_needs_cuda")));
    if (r->sass_needs_cuda <= 0 || r->sass_needs_cuda > (int)(r->major * 1000 + r->minor * 10))
        return md_fail(err, MD_ERR_INTERNAL, "toolkits.json: entry %zu (CUDA %s): bad sass_needs_cuda", i, version);
    return MD_OK;
}

static unsigned version_key(unsigned major, unsigned minor)
{
    return major * 1000 + minor;
}

md_status md_toolkit_table_load_json(json_t *doc, md_error *err)
{
    md_toolkit_table_free();
    json_t *list = json_object_get(doc, "toolkits");
    if (!json_is_array(list) || json_array_size(list) == 0)
        return md_fail(err, MD_ERR_INTERNAL, "toolkits.json: missing 'toolkits'");
    md_toolkit_row *table = calloc(json_array_size(list), sizeof *table);
    if (!table)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        md_status st = read_row(item, i, &table[i], err);
        /* The lookups take "the last match" as "the newest", so file order must be version order. */
        if (st == MD_OK && i > 0 &&
            version_key(table[i].major, table[i].minor) <= version_key(table[i - 1].major, table[i - 1].minor))
            st = md_fail(err, MD_ERR_INTERNAL, "toolkits.json: entry %zu (CUDA %s): not after CUDA %s", i,
                         table[i].version, table[i - 1].version);
        if (st != MD_OK) {
            free(table);
            return st;
        }
    }
    rows = table;
    row_count = (unsigned)json_array_size(list);
    return MD_OK;
}

md_status md_toolkit_table_load(md_error *err)
{
    return rows ? MD_OK : md_recipe_parse("toolkits.json", md_toolkit_table_load_json, err);
}

void md_toolkit_table_free(void)
{
    free(rows);
    rows = NULL;
    row_count = 0;
}

const md_toolkit_row *md_toolkit_rows(unsigned *count)
{
    md_error err;
    *count = md_toolkit_table_load(&err) == MD_OK ? row_count : 0;
    return rows;
}

const md_toolkit_row *md_toolkit_row_find(const char *version)
{
    unsigned n;
    const md_toolkit_row *all = md_toolkit_rows(&n);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(all[i].version, version) == 0)
            return &all[i];
    return NULL;
}

const md_toolkit_row *md_toolkit_row_for(unsigned major, unsigned minor)
{
    unsigned n;
    const md_toolkit_row *all = md_toolkit_rows(&n);
    const md_toolkit_row *best = NULL;
    for (unsigned i = 0; i < n; i++)
        if (all[i].major == major && all[i].minor <= minor)
            best = &all[i];
    return best;
}

static bool targets(const md_toolkit_row *r, unsigned sm)
{
    return sm >= r->sm_min && sm <= r->sm_max;
}

const md_toolkit_row *md_toolkit_row_newest_for(unsigned sm, int max_api)
{
    unsigned n;
    const md_toolkit_row *all = md_toolkit_rows(&n);
    const md_toolkit_row *best = NULL;
    for (unsigned i = 0; i < n; i++) {
        /* the driver API encodes CUDA X.Y as X*1000 + Y*10 */
        if ((sm && !targets(&all[i], sm)) || (max_api && (int)(all[i].major * 1000 + all[i].minor * 10) > max_api))
            continue;
        best = &all[i];
    }
    return best;
}

const md_toolkit_row *md_toolkit_row_newest_loading(unsigned sm, int driver_cuda, bool fetchable)
{
    unsigned n;
    const md_toolkit_row *all = md_toolkit_rows(&n);
    const md_toolkit_row *best = NULL;
    for (unsigned i = 0; i < n; i++)
        if ((!sm || targets(&all[i], sm)) && all[i].sass_needs_cuda > 0 && all[i].sass_needs_cuda <= driver_cuda &&
            (!fetchable || all[i].redist_release[0]))
            best = &all[i];
    return best;
}

bool md_toolkit_rows_targeting(unsigned sm, const md_toolkit_row **oldest, const md_toolkit_row **newest)
{
    unsigned n;
    const md_toolkit_row *all = md_toolkit_rows(&n);
    *oldest = *newest = NULL;
    for (unsigned i = 0; i < n; i++) {
        if (!targets(&all[i], sm))
            continue;
        if (!*oldest)
            *oldest = &all[i];
        *newest = &all[i];
    }
    return *oldest != NULL;
}

int md_sass_needs_cuda(unsigned major, unsigned minor)
{
    const md_toolkit_row *row = md_toolkit_row_for(major, minor);
    if (row)
        return row->sass_needs_cuda;
    unsigned n;
    const md_toolkit_row *all = md_toolkit_rows(&n);
    /* A major version newer than the table's: its own .0, as minor-version compatibility goes. */
    if (n > 0 && major > all[n - 1].major)
        return (int)(major * 1000);
    return 0;
}

int md_ptx_needs_cuda(unsigned isa)
{
    unsigned n;
    const md_toolkit_row *all = md_toolkit_rows(&n);
    for (unsigned i = 0; i < n; i++) /* oldest first */
        if (all[i].ptx_isa >= isa)
            return all[i].major == 0 ? 0 : (int)(all[i].major * 1000 + all[i].minor * 10);
    return 0;
}
