/* Which MSDA op each framework the Python probe found runs on this machine, from what is
 * installed: transformers runs its PyTorch version (grid_sample) unless msda.patch switches it or
 * the kernels package brings a Hub build; mmcv, GroundingDINO and detrex run their own compiled
 * op where one is installed (the binaries check says on which GPUs it runs) and fail, or fall
 * back to the CPU, where none is; msda.patch switches each of them either way. */
#include <stdio.h>
#include <string.h>
#include "diag.h"

static const char *version_of(const md_python_facts *p, const char *name)
{
    for (size_t i = 0; i < p->n_frameworks; i++)
        if (strcmp(p->frameworks[i].name, name) == 0)
            return p->frameworks[i].version[0] ? p->frameworks[i].version : "(version unknown)";
    return NULL;
}

/* The copy of the framework's compiled op the probe found (under SUB/ on sys.path), or NULL. */
static const char *compiled_op(const md_python_facts *p, const char *sub)
{
    char part[40];
    snprintf(part, sizeof part, "/%s/", sub);
    for (size_t i = 0; i < p->n_binary_paths; i++)
        if (strstr(p->binary_paths[i], part))
            return p->binary_paths[i];
    return NULL;
}

void md_python_framework_lines(const md_python_facts *p, md_check *c)
{
    const char *msda = version_of(p, "msda"), *kernels = version_of(p, "kernels"), *v;
    if ((v = version_of(p, "transformers")) != NULL) {
        char hub[80 + sizeof p->frameworks[0].version] = ""; /* its 73 bytes of words and the version, whole */
        if (kernels)
            snprintf(hub, sizeof hub, ", or a Hub build where a model is loaded with use_kernels=True (kernels %s)",
                     kernels);
        md_check_add(c, MD_LINE_DETAIL, "transformers %s: runs MSDA in PyTorch (grid_sample)%s; %s", v, hub,
                     msda ? "msda.patch(\"transformers\") switches it to msda (installed)"
                          : "the msda wheel and msda.patch(\"transformers\") switch it to msda");
    }
    /* patch: the msda.patch argument that switches the framework, where msda has an adapter */
    static const struct {
        const char *name, *sub, *without, *patch;
    } own[] = {
        { "mmcv", "mmcv", "without its compiled ops (mmcv-lite, or built with no CUDA): its "
                          "MultiScaleDeformableAttention fails on a GPU", "mmcv" },
        { "groundingdino", "groundingdino", "without its compiled _C: it runs MSDA in PyTorch, on the CPU only",
          "groundingdino" },
        { "detrex", "detrex", "without its compiled _C: its MSDA layers fail on a GPU", "detrex" },
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        if ((v = version_of(p, own[i].name)) == NULL)
            continue;
        char how[160] = "";
        if (own[i].patch)
            snprintf(how, sizeof how, "; %smsda.patch(\"%s\") switch%s it to msda%s", msda ? "" : "the msda wheel and ",
                     own[i].patch, msda ? "es" : "", msda ? " (installed)" : "");
        const char *op = compiled_op(p, own[i].sub);
        if (op)
            md_check_add(c, MD_LINE_DETAIL, "%s %s: runs its own compiled MSDA op, %s (the binaries check says where "
                         "it runs)%s", own[i].name, v, op, how);
        else
            md_check_add(c, MD_LINE_DETAIL, "%s %s %s%s", own[i].name, v, own[i].without, how);
    }
}
