#include "platform.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "recipes.h"

/* One allocation per list so that a failed load frees what it took in one place. */
typedef struct {
    char **items;
    unsigned count;
} name_list;

static md_platform *platforms;
static unsigned platform_count;
static name_list allowed_libraries;
static name_list pinned_symbols;

static void name_list_free(name_list *l)
{
    for (unsigned i = 0; i < l->count; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->count = 0;
}

/* KEY of OBJ into OUT: a string that fits, or "" when REQUIRED is false and KEY is null or absent. */
static bool text_field(json_t *obj, const char *key, bool required, char *out, size_t size)
{
    json_t *v = json_object_get(obj, key);
    out[0] = '\0';
    if (!v || json_is_null(v))
        return !required;
    if (!json_is_string(v) || json_string_length(v) >= size || (required && json_string_length(v) == 0))
        return false;
    snprintf(out, size, "%s", json_string_value(v));
    return true;
}

static md_status read_platform(json_t *item, size_t i, md_platform *p, md_error *err)
{
    if (!text_field(item, "name", true, p->name, sizeof p->name))
        return md_fail(err, MD_ERR_INTERNAL, "platforms.json: platform %zu: bad 'name'", i);
    json_t *machine = json_object_get(item, "machine");
    if (!json_is_integer(machine) || json_integer_value(machine) <= 0 || json_integer_value(machine) > 0xffff)
        return md_fail(err, MD_ERR_INTERNAL, "platforms.json: platform %s: bad 'machine'", p->name);
    p->machine = (unsigned)json_integer_value(machine);
    static const char *const keys[] = { "cross_compiler", "glibc_base", "qemu", "sysroot" };
    char *const fields[] = { p->cross_compiler, p->glibc_base, p->qemu, p->sysroot };
    const size_t sizes[] = { sizeof p->cross_compiler, sizeof p->glibc_base, sizeof p->qemu, sizeof p->sysroot };
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (!text_field(item, keys[k], fields[k] == p->glibc_base, fields[k], sizes[k]))
            return md_fail(err, MD_ERR_INTERNAL, "platforms.json: platform %s: bad '%s'", p->name, keys[k]);
    return MD_OK;
}

/* The non-empty string array KEY of DOC into OUT. */
static md_status read_names(json_t *doc, const char *key, name_list *out, md_error *err)
{
    json_t *list = json_object_get(doc, key);
    if (!json_is_array(list) || json_array_size(list) == 0)
        return md_fail(err, MD_ERR_INTERNAL, "platforms.json has no %s list", key);
    out->items = calloc(json_array_size(list), sizeof *out->items);
    if (!out->items)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        if (!json_is_string(item) || json_string_length(item) == 0)
            return md_fail(err, MD_ERR_INTERNAL, "platforms.json: %s entry %zu is not a name", key, i);
        out->items[i] = strdup(json_string_value(item));
        if (!out->items[i])
            return md_fail(err, MD_ERR_NOMEM, "out of memory");
        out->count = (unsigned)i + 1;
    }
    return MD_OK;
}

md_status md_platform_table_load_json(json_t *doc, md_error *err)
{
    md_platform_table_free();
    md_status st = MD_OK;
    json_t *list = json_object_get(doc, "platforms");
    if (!json_is_array(list) || json_array_size(list) == 0)
        return md_fail(err, MD_ERR_INTERNAL, "platforms.json: missing 'platforms'");
    md_platform *table = calloc(json_array_size(list), sizeof *table);
    if (!table)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        if ((st = read_platform(item, i, &table[i], err)) != MD_OK)
            goto end;
        for (size_t k = 0; k < i; k++)
            if (strcmp(table[k].name, table[i].name) == 0 || table[k].machine == table[i].machine) {
                st = md_fail(err, MD_ERR_INTERNAL, "platforms.json: platform %s repeats a name or machine",
                             table[i].name);
                goto end;
            }
    }
    if ((st = read_names(doc, "manylinux_2_17_allowed_libraries", &allowed_libraries, err)) != MD_OK ||
        (st = read_names(doc, "glibc_pinned_symbols", &pinned_symbols, err)) != MD_OK)
        goto end;
    platforms = table;
    platform_count = (unsigned)json_array_size(list);
end:
    if (st != MD_OK) {
        free(table);
        md_platform_table_free();
    }
    return st;
}

md_status md_platform_table_load(md_error *err)
{
    return platforms ? MD_OK : md_recipe_parse("platforms.json", md_platform_table_load_json, err);
}

void md_platform_table_free(void)
{
    free(platforms);
    platforms = NULL;
    platform_count = 0;
    name_list_free(&allowed_libraries);
    name_list_free(&pinned_symbols);
}

const md_platform *md_platform_all(unsigned *count)
{
    md_error err;
    *count = md_platform_table_load(&err) == MD_OK ? platform_count : 0;
    return platforms;
}

const md_platform *md_platform_find(const char *name)
{
    unsigned n;
    const md_platform *all = md_platform_all(&n);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(all[i].name, name) == 0)
            return &all[i];
    return NULL;
}

const md_platform *md_platform_by_machine(unsigned machine)
{
    unsigned n;
    const md_platform *all = md_platform_all(&n);
    for (unsigned i = 0; i < n; i++)
        if (all[i].machine == machine)
            return &all[i];
    return NULL;
}

const char *md_platform_glibc_base(const char *name)
{
    const md_platform *p = md_platform_find(name);
    return p ? p->glibc_base : NULL;
}

void md_platform_names(char *out, size_t size)
{
    unsigned n;
    const md_platform *all = md_platform_all(&n);
    size_t at = 0;
    out[0] = '\0';
    for (unsigned i = 0; i < n && at < size; i++) {
        int w = snprintf(out + at, size - at, "%s%s", i ? ", " : "", all[i].name);
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

const char *const *md_platform_allowed_libraries(unsigned *count)
{
    md_error err;
    *count = md_platform_table_load(&err) == MD_OK ? allowed_libraries.count : 0;
    return (const char *const *)allowed_libraries.items;
}

bool md_platform_library_allowed(const char *soname)
{
    unsigned n;
    const char *const *names = md_platform_allowed_libraries(&n);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(names[i], soname) == 0)
            return true;
    return false;
}

const char *const *md_platform_pinned_symbols(unsigned *count)
{
    md_error err;
    *count = md_platform_table_load(&err) == MD_OK ? pinned_symbols.count : 0;
    return (const char *const *)pinned_symbols.items;
}
