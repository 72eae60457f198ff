/* Jetson: ROOT/etc/nv_tegra_release and ROOT/proc/device-tree/model, read against
 * recipes/jetson.json (L4T to JetPack and CUDA; model string to module and compute capability). */
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include "diag.h"
#include "recipes.h"

static bool read_small(const char *path, char *out, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(out, 1, size - 1, f);
    fclose(f);
    out[n] = '\0';
    return true;
}

static const char *str(json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(obj, key));
    return v ? v : "";
}

/* Fills l4t from the first line with the recipe's pattern: "# R32 (release), REVISION: 7.4" -> 32.7.4. */
static bool parse_release(json_t *doc, const char *text, md_jetson_facts *j)
{
    const char *pattern = str(json_object_get(doc, "release_file"), "pattern");
    regex_t re;
    if (!*pattern || regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE) != 0)
        return false;
    regmatch_t g[4];
    bool ok = regexec(&re, text, 4, g, 0) == 0;
    regfree(&re);
    if (!ok)
        return false;
    snprintf(j->l4t, sizeof j->l4t, "%.*s.%.*s.%.*s", (int)(g[1].rm_eo - g[1].rm_so), text + g[1].rm_so,
             (int)(g[2].rm_eo - g[2].rm_so), text + g[2].rm_so, (int)(g[3].rm_eo - g[3].rm_so), text + g[3].rm_so);
    return true;
}

static void lookup_release(json_t *doc, md_jetson_facts *j)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "releases"), i, r) {
        if (strcmp(str(r, "l4t"), j->l4t) == 0) {
            snprintf(j->jetpack, sizeof j->jetpack, "%s", str(r, "jetpack"));
            snprintf(j->cuda, sizeof j->cuda, "%s", str(r, "cuda"));
            return;
        }
    }
    /* an unlisted point release: its family still says JetPack and CUDA */
    unsigned major = 0;
    sscanf(j->l4t, "%u", &major);
    json_array_foreach(json_object_get(doc, "families"), i, r) {
        if (json_integer_value(json_object_get(r, "l4t_major")) == (json_int_t)major) {
            snprintf(j->jetpack, sizeof j->jetpack, "%s", str(r, "jetpack"));
            snprintf(j->cuda, sizeof j->cuda, "%s", str(r, "cuda"));
            return;
        }
    }
}

static void lookup_module(json_t *doc, md_jetson_facts *j)
{
    const char *module_id = NULL;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "model_rules"), i, r) {
        if (*str(r, "contains") && strstr(j->model, str(r, "contains"))) {
            module_id = str(r, "module");
            break;
        }
    }
    if (!module_id)
        return;
    json_array_foreach(json_object_get(doc, "modules"), i, r) {
        if (strcmp(str(r, "id"), module_id) == 0) {
            unsigned ma = 0, mi = 0;
            snprintf(j->module, sizeof j->module, "%s", str(r, "name"));
            if (sscanf(str(r, "cc"), "%u.%u", &ma, &mi) == 2)
                j->sm = ma * 10 + mi;
            j->registers_per_block = (unsigned)json_integer_value(json_object_get(r, "regs_per_block"));
            return;
        }
    }
}

void md_probe_jetson(md_machine *m, md_check *c)
{
    c->id = "jetson";
    c->name = "Jetson";
    c->status = MD_CHECK_OK;
    md_jetson_facts *j = &m->jetson;
    char path[PATH_MAX], text[4096];
    md_rooted(m, "/etc/nv_tegra_release", path, sizeof path);
    if (!read_small(path, text, sizeof text)) {
        c->status = MD_CHECK_SKIPPED;
        snprintf(c->summary, sizeof c->summary, "not a Jetson (no %s)", path);
        return;
    }
    j->present = true;
    md_error err;
    json_t *doc = md_recipe_load("jetson.json", &err);
    if (!doc) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "the probe failed: %s", err.message);
        return;
    }
    if (!parse_release(doc, text, j)) {
        c->status = MD_CHECK_WARN;
        md_check_add(c, MD_LINE_PROBLEM, "%s does not start with '# R<major> (release), REVISION: <x.y>'", path);
    } else {
        lookup_release(doc, j);
    }
    md_rooted(m, "/proc/device-tree/model", path, sizeof path);
    if (read_small(path, j->model, sizeof j->model)) /* NUL-terminated by the kernel; stops there */
        j->model[strcspn(j->model, "\n")] = '\0';
    lookup_module(doc, j);
    json_decref(doc);
    snprintf(c->summary, sizeof c->summary, "%s, L4T %s, JetPack %s, CUDA %s", j->module[0] ? j->module : "unknown module",
             j->l4t[0] ? j->l4t : "unknown", j->jetpack[0] ? j->jetpack : "unknown", j->cuda[0] ? j->cuda : "unknown");
    if (j->sm)
        md_check_add(c, MD_LINE_DETAIL, "%s: sm_%u (compute capability %u.%u), %u registers per block", j->module, j->sm,
                     j->sm / 10, j->sm % 10, j->registers_per_block);
    else {
        md_check_raise(c, MD_CHECK_WARN);
        md_check_add(c, MD_LINE_PROBLEM, "device-tree model '%s' names no known module", j->model);
    }
    md_check_add(c, MD_LINE_DETAIL, "device-tree model: %s", j->model[0] ? j->model : "(none)");
    if (j->registers_per_block && j->registers_per_block < 65536)
        md_check_add(c, MD_LINE_HINT, "one block gets %u registers here: 1024-thread kernels need at most %u registers "
                     "per thread", j->registers_per_block, j->registers_per_block / 1024);
}
