/* Jetson: ROOT/etc/nv_tegra_release and ROOT/proc/device-tree/model, read against
 * recipes/jetson.json (L4T to JetPack and CUDA; model string to module and compute capability). */
#include <stdio.h>
#include <string.h>
#include "diag.h"
#include "recipes/jetson_table.h"

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

/* JetPack and CUDA of J->l4t: its release row, else, for an unlisted point release, its family's. */
static void lookup_release(md_jetson_facts *j)
{
    const md_jetson_release *r = md_jetson_release_find(j->l4t);
    if (r) {
        snprintf(j->jetpack, sizeof j->jetpack, "%s", r->jetpack);
        snprintf(j->cuda, sizeof j->cuda, "%s", r->cuda);
        return;
    }
    unsigned major = 0;
    sscanf(j->l4t, "%u", &major);
    const md_jetson_family *f = md_jetson_family_find(major);
    if (f) {
        snprintf(j->jetpack, sizeof j->jetpack, "%s", f->jetpack);
        snprintf(j->cuda, sizeof j->cuda, "%s", f->cuda);
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
    if (md_jetson_table_load(&err) != MD_OK) {
        c->status = MD_CHECK_ERROR;
        snprintf(c->summary, sizeof c->summary, "the probe failed: %s", err.message);
        return;
    }
    if (!md_jetson_l4t_parse(text, j->l4t, sizeof j->l4t)) {
        c->status = MD_CHECK_WARN;
        md_check_add(c, MD_LINE_PROBLEM, "%s does not start with '# R<major> (release), REVISION: <x.y>'", path);
    } else {
        lookup_release(j);
    }
    md_rooted(m, "/proc/device-tree/model", path, sizeof path);
    if (read_small(path, j->model, sizeof j->model)) /* NUL-terminated by the kernel; stops there */
        j->model[strcspn(j->model, "\n")] = '\0';
    const md_jetson_module *module = md_jetson_module_for_model(j->model);
    if (module) {
        snprintf(j->module, sizeof j->module, "%s", module->name);
        j->sm = module->sm;
        j->registers_per_block = module->registers_per_block;
    }
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
