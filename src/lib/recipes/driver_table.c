#include "driver_table.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jetson_table.h"
#include "recipes.h"
#include "toolkit_table.h"

typedef struct {
    unsigned branch;
    int cuda;
} branch_row;

typedef struct {
    int cuda;
    char driver[24];
} floor_row;

static branch_row *branches;
static size_t n_branches;
static floor_row *floors;
static size_t n_floors;

void md_driver_table_free(void)
{
    free(branches);
    free(floors);
    branches = NULL;
    floors = NULL;
    n_branches = n_floors = 0;
}

static md_status read_rows(json_t *doc, md_error *err)
{
    json_t *list = json_object_get(doc, "branches"), *floor_list = json_object_get(doc, "floors");
    if (!json_is_array(list) || json_array_size(list) == 0 || !json_is_array(floor_list))
        return md_fail(err, MD_ERR_INTERNAL, "drivers.json: missing 'branches' or 'floors'");
    branches = calloc(json_array_size(list), sizeof *branches);
    floors = calloc(json_array_size(floor_list) + 1, sizeof *floors);
    if (!branches || !floors)
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item) {
        json_t *b = json_object_get(item, "branch");
        int cuda = md_cuda_version_parse(json_string_value(json_object_get(item, "cuda")));
        if (!json_is_integer(b) || json_integer_value(b) <= 0 || json_integer_value(b) > 100000 || cuda <= 0)
            return md_fail(err, MD_ERR_INTERNAL, "drivers.json: branch entry %zu: bad 'branch' or 'cuda'", i);
        branch_row r = { (unsigned)json_integer_value(b), cuda };
        if (i > 0 && (r.branch <= branches[i - 1].branch || r.cuda < branches[i - 1].cuda))
            return md_fail(err, MD_ERR_INTERNAL, "drivers.json: branch %u: not after branch %u", r.branch,
                           branches[i - 1].branch);
        branches[n_branches++] = r;
    }
    json_array_foreach(floor_list, i, item) {
        const char *driver = json_string_value(json_object_get(item, "driver"));
        int cuda = md_cuda_version_parse(json_string_value(json_object_get(item, "cuda")));
        if (cuda <= 0 || !driver || !*driver || strlen(driver) >= sizeof floors[0].driver)
            return md_fail(err, MD_ERR_INTERNAL, "drivers.json: floor entry %zu: bad 'cuda' or 'driver'", i);
        floors[n_floors].cuda = cuda;
        snprintf(floors[n_floors++].driver, sizeof floors[0].driver, "%s", driver);
    }
    return MD_OK;
}

md_status md_driver_table_load_json(json_t *doc, md_error *err)
{
    md_driver_table_free();
    md_status st = read_rows(doc, err);
    if (st != MD_OK)
        md_driver_table_free();
    return st;
}

md_status md_driver_table_load(md_error *err)
{
    return branches ? MD_OK : md_recipe_parse("drivers.json", md_driver_table_load_json, err);
}

int md_driver_cuda_of_branch(unsigned branch)
{
    md_error err;
    int cuda = 0;
    if (md_driver_table_load(&err) != MD_OK)
        return 0;
    for (size_t i = 0; i < n_branches && branches[i].branch <= branch; i++)
        cuda = branches[i].cuda;
    return cuda;
}

bool md_driver_min_for_cuda(int cuda, char *out, size_t size)
{
    md_error err;
    if (md_driver_table_load(&err) != MD_OK)
        return false;
    for (size_t i = 0; i < n_floors; i++)
        if (floors[i].cuda == cuda) {
            snprintf(out, size, "%s", floors[i].driver);
            return true;
        }
    for (size_t i = 0; i < n_branches; i++)
        if (branches[i].cuda >= cuda) {
            snprintf(out, size, "%u", branches[i].branch);
            return true;
        }
    return false;
}

void md_driver_need_text(int needs_cuda, char *out, size_t size)
{
    char driver[24], cuda[16];
    out[0] = '\0';
    if (needs_cuda <= 0)
        return;
    md_cuda_version_text(needs_cuda, cuda, sizeof cuda);
    if (md_driver_min_for_cuda(needs_cuda, driver, sizeof driver))
        snprintf(out, size, "driver >= %s (CUDA %s)", driver, cuda);
    else
        snprintf(out, size, "a driver of CUDA %s or newer", cuda);
}

static md_status bad_driver(const char *text, md_error *err)
{
    return md_fail(err, MD_ERR_ARGUMENT,
                   "'%s' names no driver: give a Linux driver (535, 535.104.05), a Jetson L4T line (r32, r35) "
                   "or a CUDA version (cuda12.2)",
                   text);
}

/* "r35", "R35.4.1": the CUDA of that L4T line, from the Jetson table. */
static md_status parse_l4t(const char *text, const char *digits, md_driver *out, md_error *err)
{
    char *end;
    unsigned long major = strtoul(digits, &end, 10);
    if (end == digits || (*end && *end != '.'))
        return bad_driver(text, err);
    md_status st = md_jetson_table_load(err);
    if (st != MD_OK)
        return st;
    const md_jetson_family *f = md_jetson_family_find((unsigned)major);
    if (!f)
        return md_fail(err, MD_ERR_ARGUMENT, "'%s': recipes/jetson.json knows no L4T r%lu", text, major);
    /* A family may span versions ("12.2-12.6"): the oldest is what every release of it runs. */
    char first[16];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(f->cuda, "-"), f->cuda);
    out->cuda = md_cuda_version_parse(first);
    out->tegra = true;
    if (out->cuda <= 0)
        return md_fail(err, MD_ERR_INTERNAL, "jetson.json: r%lu: bad cuda '%s'", major, f->cuda);
    return MD_OK;
}

md_status md_driver_parse(const char *text, md_driver *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    while (text && isspace((unsigned char)*text))
        text++;
    if (!text || !*text || strlen(text) >= sizeof out->name)
        return bad_driver(text ? text : "", err);
    snprintf(out->name, sizeof out->name, "%s", text);
    for (size_t n = strlen(out->name); n > 0 && isspace((unsigned char)out->name[n - 1]); n--)
        out->name[n - 1] = '\0';
    const char *t = out->name;
    md_status st = md_driver_table_load(err);
    if (st != MD_OK)
        return st;
    if (t[0] == 'r' || t[0] == 'R')
        return parse_l4t(text, t + 1, out, err);
    if (strncasecmp(t, "cuda", 4) == 0) {
        out->cuda = md_cuda_version_parse(t + 4 + (t[4] == '-' || t[4] == ' '));
        return out->cuda > 0 ? MD_OK : bad_driver(text, err);
    }
    /* A Linux driver: BRANCH or BRANCH.MINOR[.PATCH], digits only. */
    char *end;
    unsigned long branch = strtoul(t, &end, 10);
    if (end == t || !isdigit((unsigned char)t[0]) || branch < 100 || branch > 9999)
        return bad_driver(text, err);
    for (const char *p = end; *p; p++)
        if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
            return bad_driver(text, err);
    out->cuda = md_driver_cuda_of_branch((unsigned)branch);
    if (out->cuda <= 0)
        return md_fail(err, MD_ERR_ARGUMENT, "driver %s is older than every branch recipes/drivers.json knows", t);
    return MD_OK;
}
