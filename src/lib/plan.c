#include "plan.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "arch.h"

#define MAX_TARGETS 64
#define THREADS_64K_REGISTERS 256u
/* At 32K registers per block a 256-thread bound caps a thread at 128 registers; 128 threads
 * keep the full 255 available, so ptxas never has to spill to honour the bound. */
#define THREADS_32K_REGISTERS 128u

typedef struct {
    unsigned sm;
    bool ptx;
} wanted;

static void add_note(md_plan *plan, const char *fmt, unsigned sm)
{
    if (plan->n_notes < sizeof plan->notes / sizeof plan->notes[0])
        snprintf(plan->notes[plan->n_notes++], sizeof plan->notes[0], fmt, sm);
}

static bool add_wanted(wanted *list, size_t *n, unsigned sm, bool ptx)
{
    for (size_t i = 0; i < *n; i++)
        if (list[i].sm == sm && list[i].ptx == ptx)
            return true;
    if (*n == MAX_TARGETS)
        return false;
    list[(*n)++] = (wanted){ sm, ptx };
    return true;
}

static int compare_wanted(const void *a, const void *b)
{
    const wanted *x = a, *y = b;
    if (x->ptx != y->ptx)
        return x->ptx ? 1 : -1;
    return x->sm < y->sm ? -1 : x->sm > y->sm;
}

/* "all": every architecture a toolkit targets that the table knows, and PTX of the newest. */
static md_status wanted_all(const md_toolkit *tks, size_t n_tks, md_plan *plan, wanted *list, size_t *n,
                            md_error *err)
{
    unsigned newest = 0, left_out[MAX_TARGETS];
    size_t n_left_out = 0;
    for (size_t t = 0; t < n_tks; t++) {
        for (size_t i = 0; i < tks[t].n_sms; i++) {
            unsigned sm = tks[t].sms[i];
            if (!md_arch_by_sm(sm)) {
                size_t k = 0;
                while (k < n_left_out && left_out[k] != sm)
                    k++;
                if (k == n_left_out && n_left_out < MAX_TARGETS) {
                    left_out[n_left_out++] = sm;
                    add_note(plan, "sm_%u: left out, not in recipes/architectures.json", sm);
                }
                continue;
            }
            if (!add_wanted(list, n, sm, false))
                return md_fail(err, MD_ERR_ARGUMENT, "too many architectures");
            if (sm > newest)
                newest = sm;
        }
    }
    if (newest)
        add_wanted(list, n, newest, true);
    return MD_OK;
}

static md_status wanted_list(const char *spec, wanted *list, size_t *n, md_error *err)
{
    char copy[1024];
    if (strlen(spec) >= sizeof copy)
        return md_fail(err, MD_ERR_ARGUMENT, "architecture list too long");
    snprintf(copy, sizeof copy, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok))
            tok++;
        bool ptx = false;
        char *plus = strchr(tok, '+');
        if (plus) {
            if (strcasecmp(plus, "+PTX") != 0)
                return md_fail(err, MD_ERR_ARGUMENT, "'%s': only '+PTX' may follow an architecture", tok);
            *plus = '\0';
            ptx = true;
        }
        if (!strcmp(tok, "all") || !strcmp(tok, "native"))
            return md_fail(err, MD_ERR_ARGUMENT, "'%s' cannot be combined with other architectures", tok);
        md_gpu_target target;
        md_status st = md_gpu_target_parse(tok, &target, err);
        if (st != MD_OK)
            return st;
        if (!add_wanted(list, n, target.arch->sm, false) || (ptx && !add_wanted(list, n, target.arch->sm, true)))
            return md_fail(err, MD_ERR_ARGUMENT, "too many architectures");
    }
    if (*n == 0)
        return md_fail(err, MD_ERR_ARGUMENT, "empty architecture list");
    return MD_OK;
}

/* The host compiler nvcc of TK accepts: the default g++ when new enough is not too new, else
 * the newest g++-N within its limit. */
static md_status pick_compiler(const md_toolkit *tk, const md_host_compiler *ccs, size_t n_ccs, char *out,
                               size_t size, md_error *err)
{
    out[0] = '\0';
    const md_host_compiler *def = NULL;
    for (size_t i = 0; i < n_ccs; i++)
        if (ccs[i].is_default)
            def = &ccs[i];
    if (tk->max_gcc == 0 || (def && def->major <= tk->max_gcc))
        return MD_OK;
    for (size_t i = 0; i < n_ccs; i++) { /* newest first */
        if (ccs[i].major <= tk->max_gcc) {
            snprintf(out, size, "%s", ccs[i].path);
            return MD_OK;
        }
    }
    if (def)
        return md_fail(err, MD_ERR_UNSUPPORTED,
                       "CUDA %s needs g++ %u or older, found g++ %u: install one (apt-get install g++-%u)",
                       tk->version, tk->max_gcc, def->major, tk->max_gcc);
    return md_fail(err, MD_ERR_UNSUPPORTED, "CUDA %s needs a host g++ (%u or older): apt-get install g++-%u",
                   tk->version, tk->max_gcc, tk->max_gcc);
}

static void choose_kernel_options(md_plan_target *t)
{
    const md_arch *a = md_arch_by_sm(t->sm);
    /* f16 and bf16 are stored as 16 bits and computed in f32, which every architecture can do;
     * what differs is how the backward adds into a 16-bit value gradient. */
    t->f16 = true;
    t->bf16 = true;
    t->f16_atomic = a->half_atomic_add ? MD_ATOMIC_NATIVE : MD_ATOMIC_F32_BUFFER;
    /* Native bf16 atomics on every level cost 1.9e-2 of value-gradient error on encoder shapes
     * (kernels/README.md): where they exist, only on sparse levels. */
    t->bf16_atomic = a->bf16 ? MD_ATOMIC_MIXED : MD_ATOMIC_F32_BUFFER;
    t->max_threads = a->registers_per_block <= 32768 ? THREADS_32K_REGISTERS : THREADS_64K_REGISTERS;
}

md_status md_plan_make(const char *arch_spec, const unsigned *native_sms, size_t n_native,
                       const md_toolkit *toolkits, size_t n_toolkits, const md_host_compiler *compilers,
                       size_t n_compilers, md_plan *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    md_status st = md_arch_table_load(err);
    if (st != MD_OK)
        return st;
    if (n_toolkits == 0)
        return md_fail(err, MD_ERR_UNSUPPORTED,
                       "no CUDA toolkit found (nvcc on PATH, CUDA_HOME, /usr/local/cuda*); give one with --toolkit DIR");
    wanted list[MAX_TARGETS];
    size_t n = 0;
    if (strcmp(arch_spec, "all") == 0) {
        st = wanted_all(toolkits, n_toolkits, out, list, &n, err);
    } else if (strcmp(arch_spec, "native") == 0) {
        if (n_native == 0)
            return md_fail(err, MD_ERR_UNSUPPORTED, "--arch native: no GPU found on this machine");
        for (size_t i = 0; i < n_native; i++) {
            if (!md_arch_by_sm(native_sms[i]))
                return md_fail(err, MD_ERR_UNSUPPORTED, "--arch native: GPU of compute capability %u.%u is not in the table",
                               native_sms[i] / 10, native_sms[i] % 10);
            add_wanted(list, &n, native_sms[i], false);
        }
    } else {
        st = wanted_list(arch_spec, list, &n, err);
    }
    if (st != MD_OK)
        return st;
    qsort(list, n, sizeof *list, compare_wanted);

    out->toolkits = malloc(n_toolkits * sizeof *out->toolkits);
    out->targets = calloc(n ? n : 1, sizeof *out->targets);
    if (!out->toolkits || !out->targets) {
        md_plan_free(out);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    memcpy(out->toolkits, toolkits, n_toolkits * sizeof *toolkits);
    out->n_toolkits = n_toolkits;

    char unsupported[512] = "";
    for (size_t i = 0; i < n; i++) {
        const md_toolkit *tk = NULL;
        for (size_t t = 0; t < n_toolkits && !tk; t++) /* newest first */
            if (md_toolkit_supports(&out->toolkits[t], list[i].sm))
                tk = &out->toolkits[t];
        if (!tk) {
            char who[64], found[128] = "";
            md_toolkits_supporting(list[i].sm, who, sizeof who);
            for (size_t t = 0; t < n_toolkits; t++)
                snprintf(found + strlen(found), sizeof found - strlen(found), "%s%s", t ? ", " : "",
                         toolkits[t].version);
            snprintf(unsupported + strlen(unsupported), sizeof unsupported - strlen(unsupported),
                     "%ssm_%u needs %s; found %s", unsupported[0] ? "; " : "", list[i].sm, who, found);
            continue;
        }
        md_plan_target *t = &out->targets[out->n_targets++];
        t->sm = list[i].sm;
        t->ptx = list[i].ptx;
        t->toolkit = tk;
        choose_kernel_options(t);
        st = pick_compiler(tk, compilers, n_compilers, t->ccbin, sizeof t->ccbin, err);
        if (st != MD_OK) {
            md_plan_free(out);
            return st;
        }
    }
    if (unsupported[0]) {
        md_plan_free(out);
        return md_fail(err, MD_ERR_UNSUPPORTED, "%s (add one with --toolkit DIR)",
                       unsupported);
    }
    return MD_OK;
}

void md_plan_free(md_plan *plan)
{
    free(plan->toolkits);
    free(plan->targets);
    memset(plan, 0, sizeof *plan);
}
