#include "plan.h"
#include "msda_kparams.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include "recipes/arch.h"
#include "recipes/driver_table.h"
#include "recipes/toolkit_table.h"

#define MAX_TARGETS 64

typedef struct {
    unsigned sm;
    bool ptx;
} wanted;

static void add_note(md_plan *plan, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_note(md_plan *plan, const char *fmt, ...)
{
    if (plan->n_notes == sizeof plan->notes / sizeof plan->notes[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(plan->notes[plan->n_notes++], sizeof plan->notes[0], fmt, ap);
    va_end(ap);
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

/* "all": every SASS architecture a toolkit targets, and the PTX the recipe asks for: of the
 * newest architecture, and of the oldest one the newest toolkit targets. */
static md_status wanted_all(const md_toolkit *tks, size_t n_tks, unsigned ptx, wanted *list, size_t *n,
                            md_error *err)
{
    unsigned newest = 0, oldest_of_newest = 0;
    for (size_t t = 0; t < n_tks; t++) {
        for (size_t i = 0; i < tks[t].n_sms; i++) {
            unsigned sm = tks[t].sms[i];
            if (!add_wanted(list, n, sm, false))
                return md_fail(err, MD_ERR_ARGUMENT, "too many architectures");
            if (sm > newest)
                newest = sm;
        }
    }
    for (size_t i = 0; n_tks > 0 && i < tks[0].n_sms; i++) /* toolkits are sorted newest first */
        if (!oldest_of_newest || tks[0].sms[i] < oldest_of_newest)
            oldest_of_newest = tks[0].sms[i];
    if (newest && (ptx & MD_PTX_NEWEST))
        add_wanted(list, n, newest, true);
    if (oldest_of_newest && (ptx & MD_PTX_OLDEST_OF_NEWEST))
        add_wanted(list, n, oldest_of_newest, true);
    return MD_OK;
}

static bool any_toolkit_targets(const md_toolkit *tks, size_t n_tks, unsigned sm)
{
    for (size_t t = 0; t < n_tks; t++)
        if (md_toolkit_supports(&tks[t], sm))
            return true;
    return false;
}

/* Files SM under the release `fetch` would bring for it: the newest of the table that targets
 * it, of a version none of TKS has (a toolkit here that lacks SM is not fetched again). */
static void add_fetch(md_plan *plan, const md_toolkit *tks, size_t n_tks, unsigned sm)
{
    unsigned n;
    const md_toolkit_row *rows = md_toolkit_rows(&n), *row = NULL;
    for (unsigned i = 0; i < n; i++) {
        bool here = false;
        for (size_t t = 0; t < n_tks && !here; t++)
            here = tks[t].major == rows[i].major && tks[t].minor == rows[i].minor;
        if (rows[i].redist_release[0] && sm >= rows[i].sm_min && sm <= rows[i].sm_max && !here)
            row = &rows[i];
    }
    if (!row)
        return;
    md_plan_fetch *f = NULL;
    for (size_t i = 0; i < plan->n_fetch && !f; i++)
        if (strcmp(plan->fetch[i].release, row->redist_release) == 0)
            f = &plan->fetch[i];
    if (!f && plan->n_fetch < MD_PLAN_MAX_FETCH) {
        f = &plan->fetch[plan->n_fetch++];
        snprintf(f->release, sizeof f->release, "%s", row->redist_release);
    }
    if (f && f->n_sms < MD_MAX_SMS)
        f->sms[f->n_sms++] = sm;
}

/* For "all": the architectures of the table that no toolkit here targets, each with the fetch
 * that adds it, as notes. */
static void note_fetchable(md_plan *plan, const md_toolkit *tks, size_t n_tks)
{
    unsigned n;
    const md_arch *all = md_arch_all(&n);
    for (unsigned i = 0; i < n; i++)
        if (!any_toolkit_targets(tks, n_tks, all[i].sm))
            add_fetch(plan, tks, n_tks, all[i].sm);
    for (size_t i = 0; i < plan->n_fetch; i++) {
        const md_plan_fetch *f = &plan->fetch[i];
        char list[256] = "";
        for (size_t k = 0; k < f->n_sms; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%ssm_%u", k ? ", " : "", f->sms[k]);
        add_note(plan, "%s: no toolkit here targets %s; add %s with: msda-doctor fetch --cuda %s (or build --fetch)",
                 list, f->n_sms == 1 ? "it" : "them", f->n_sms == 1 ? "it" : "them", f->release);
    }
}

static md_status wanted_list(const char *spec, const md_toolkit *tks, size_t n_tks, wanted *list, size_t *n,
                             md_error *err)
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
        if (md_arch_spec_kind_of(tok) != MD_ARCH_SPEC_LIST)
            return md_fail(err, MD_ERR_ARGUMENT, "'%s' cannot be combined with other architectures", tok);
        /* An architecture the table lacks is fine where a toolkit here targets it. */
        unsigned sm;
        if (!md_arch_parse_number(tok, &sm) || !any_toolkit_targets(tks, n_tks, sm)) {
            md_gpu_target target;
            md_status st = md_gpu_target_parse(tok, &target, err);
            if (st != MD_OK)
                return st;
            sm = target.arch->sm;
        }
        if (!add_wanted(list, n, sm, false) || (ptx && !add_wanted(list, n, sm, true)))
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
    /* The distribution's own g++ first: g++-N exists only where the distribution packages that
     * version (Debian 12 has no g++-15), and its default is often old enough. */
    return md_fail(err, MD_ERR_UNSUPPORTED,
                   "CUDA %s needs a host g++ (%u or older) and none is installed: apt-get install g++ (or g++-%u "
                   "where the default is newer)",
                   tk->version, tk->max_gcc, tk->max_gcc);
}

static md_define *find_define(md_plan_target *t, const char *name)
{
    for (size_t i = 0; i < t->n_defines; i++)
        if (strcmp(t->defines[i].name, name) == 0)
            return &t->defines[i];
    return NULL;
}

/* "NAME=VALUE" or "NAME": a C identifier and an integer. */
static md_status parse_define(const char *text, md_define *out, md_error *err)
{
    size_t len = strcspn(text, "=");
    bool ident = len > 0 && len < sizeof out->name && (isalpha((unsigned char)text[0]) || text[0] == '_');
    for (size_t i = 0; ident && i < len; i++)
        ident = isalnum((unsigned char)text[i]) || text[i] == '_';
    if (!ident)
        return md_fail(err, MD_ERR_ARGUMENT, "define '%s': the name must be a C identifier", text);
    snprintf(out->name, sizeof out->name, "%.*s", (int)len, text);
    out->value = 1;
    if (text[len] == '=') {
        char *end;
        errno = 0;
        out->value = strtol(text + len + 1, &end, 10);
        if (errno || end == text + len + 1 || *end || out->value < INT_MIN || out->value > INT_MAX)
            return md_fail(err, MD_ERR_ARGUMENT, "define '%s': the value must be an integer", text);
    }
    return MD_OK;
}

/* The recipe's knobs for the architecture, then the caller's defines, each replacing a knob of
 * the same name or added after them. */
static md_status choose_defines(md_plan_target *t, const md_plan_request *req, md_error *err)
{
    const md_arch *a = md_arch_by_sm(t->sm);
    t->known = a != NULL;
    for (size_t i = 0; i < req->recipe->n_knobs; i++) {
        md_define *d = &t->defines[t->n_defines++];
        snprintf(d->name, sizeof d->name, "%s", req->recipe->knobs[i].name);
        d->value = md_knob_value(&req->recipe->knobs[i], a);
    }
    for (size_t i = 0; req->defines && req->defines[i]; i++) {
        md_define d;
        md_status st = parse_define(req->defines[i], &d, err);
        if (st != MD_OK)
            return st;
        md_define *slot = find_define(t, d.name);
        if (!slot) {
            if (t->n_defines == MD_MAX_DEFINES)
                return md_fail(err, MD_ERR_ARGUMENT, "too many defines (at most %d macros in all)",
                               MD_MAX_DEFINES);
            slot = &t->defines[t->n_defines++];
        }
        *slot = d;
    }
    return MD_OK;
}

long md_plan_define(const md_plan_target *t, const char *name, long fallback)
{
    for (size_t i = 0; i < t->n_defines; i++)
        if (strcmp(t->defines[i].name, name) == 0)
            return t->defines[i].value;
    return fallback;
}

const char *md_atomic_name(long strategy)
{
    switch (strategy) {
    case MSDA_ATOMIC_NATIVE: return "native";
    case MSDA_ATOMIC_CAS: return "cas";
    case MSDA_ATOMIC_F32_BUFFER: return "f32-buffer";
    case MSDA_ATOMIC_MIXED: return "mixed";
    }
    return "?";
}

/* One note for the architectures the table lacks, saying what they got. */
static void note_unknown(md_plan *plan)
{
    char list[128] = "";
    const md_plan_target *first = NULL;
    for (size_t i = 0; i < plan->n_targets; i++) {
        const md_plan_target *t = &plan->targets[i];
        if (t->known || t->ptx)
            continue;
        first = first ? first : t;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%ssm_%u", list[0] ? ", " : "", t->sm);
    }
    if (!first)
        return;
    char knobs[128] = "";
    for (size_t i = 0; i < first->n_defines; i++)
        snprintf(knobs + strlen(knobs), sizeof knobs - strlen(knobs), "%s%s=%ld", i ? " " : "", first->defines[i].name,
                 first->defines[i].value);
    add_note(plan, "%s: not in recipes/architectures.json, built with the safe defaults of kernels/libmsda.json (%s)",
             list, knobs);
}

/* The toolkit of the plan whose SASS for SM the oldest drivers load: the lowest sass_needs_cuda,
 * the newest such toolkit on a tie. NULL when none targets SM. */
static const md_toolkit *lowest_driver_toolkit(const md_plan *plan, unsigned sm)
{
    const md_toolkit *best = NULL;
    int best_needs = 0;
    for (size_t t = 0; t < plan->n_toolkits; t++) { /* newest first */
        const md_toolkit *tk = &plan->toolkits[t];
        int needs = md_sass_needs_cuda(tk->major, tk->minor);
        if (md_toolkit_supports(tk, sm) && needs > 0 && (!best || needs < best_needs)) {
            best = tk;
            best_needs = needs;
        }
    }
    return best;
}

/* For "native" with the driver's version known: the newest toolkit of the plan that targets SM
 * and whose SASS that driver loads. NULL otherwise (then the plan is that of a list: the newest
 * toolkit's SASS and the oldest drivers'), also when no toolkit's SASS loads on the driver. */
static const md_toolkit *native_loader(const md_plan *plan, const md_plan_request *req, unsigned sm)
{
    if (req->kind != MD_ARCH_SPEC_NATIVE || req->native_driver_cuda <= 0)
        return NULL;
    for (size_t t = 0; t < plan->n_toolkits; t++) { /* newest first */
        const md_toolkit *tk = &plan->toolkits[t];
        int needs = md_sass_needs_cuda(tk->major, tk->minor);
        if (md_toolkit_supports(tk, sm) && needs > 0 && needs <= req->native_driver_cuda)
            return tk;
    }
    return NULL;
}

/* The PTX ISA nvcc TK writes (recipes/toolkits.json), major * 10 + minor; 0 when unknown. */
static unsigned toolkit_ptx_isa(const md_toolkit *tk)
{
    const md_toolkit_row *row = md_toolkit_row_for(tk->major, tk->minor);
    return row ? row->ptx_isa : 0;
}

/* Appends a target of SM from TK: SASS, PTX, or (OLD_ISA not 0) the toolkit's PTX lowered to
 * OLD_ISA; with its knobs, host compiler and what it needs of a driver. */
static md_status add_target(md_plan *out, const md_plan_request *req, unsigned sm, bool ptx, const md_toolkit *tk,
                            unsigned old_isa, md_error *err)
{
    md_plan_target *t = &out->targets[out->n_targets++];
    t->sm = sm;
    t->ptx = ptx;
    t->toolkit = tk;
    if (!ptx) {
        t->needs_cuda = md_sass_needs_cuda(tk->major, tk->minor);
    } else {
        unsigned own = toolkit_ptx_isa(tk);
        t->lowered = old_isa && own > old_isa;
        t->ptx_isa = t->lowered ? old_isa : own;
        t->needs_cuda = t->ptx_isa ? md_ptx_needs_cuda(t->ptx_isa) : 0;
    }
    md_cuda_version_text(t->needs_cuda, t->needs_cuda_text, sizeof t->needs_cuda_text);
    if (!md_driver_min_for_cuda(t->needs_cuda, t->needs_driver, sizeof t->needs_driver))
        snprintf(t->needs_driver, sizeof t->needs_driver, "unknown");
    md_status st = choose_defines(t, req, err);
    if (st == MD_OK)
        st = pick_compiler(tk, req->compilers, req->n_compilers, t->ccbin, sizeof t->ccbin, err);
    return st;
}

/* The recipe's PTX for drivers older than any toolkit here (Jetson r32's CUDA 10.2), for each of
 * its architectures the plan builds SASS for: from the toolkit with the oldest PTX ISA that
 * targets it, lowered to the recipe's ISA. */
static md_status add_old_driver_ptx(md_plan *out, const md_plan_request *req, const wanted *list, size_t n,
                                    md_error *err)
{
    const md_libmsda_recipe *r = req->recipe;
    for (size_t k = 0; r->old_ptx_isa && k < r->n_old_ptx_sms; k++) {
        const unsigned sm = r->old_ptx_sms[k];
        bool built = false;
        for (size_t i = 0; i < n && !built; i++)
            built = list[i].sm == sm && !list[i].ptx;
        const md_toolkit *oldest = NULL;
        for (size_t t = 0; t < out->n_toolkits; t++) /* newest first: the last that targets SM */
            if (md_toolkit_supports(&out->toolkits[t], sm) && toolkit_ptx_isa(&out->toolkits[t]))
                oldest = &out->toolkits[t];
        if (!built || !oldest)
            continue;
        md_status st = add_target(out, req, sm, true, oldest, r->old_ptx_isa, err);
        if (st != MD_OK)
            return st;
    }
    return MD_OK;
}

md_arch_spec_kind md_arch_spec_kind_of(const char *spec)
{
    if (strcmp(spec, "all") == 0)
        return MD_ARCH_SPEC_ALL;
    if (strcmp(spec, "native") == 0)
        return MD_ARCH_SPEC_NATIVE;
    return MD_ARCH_SPEC_LIST;
}

md_status md_plan_make(const md_plan_request *req, md_plan *out, md_error *err)
{
    memset(out, 0, sizeof *out);
    md_status st = md_arch_table_load(err);
    if (st != MD_OK)
        return st;
    if (req->n_toolkits == 0)
        return md_hint_set(err, MD_HINT_TOOLKIT,
                           md_fail(err, MD_ERR_UNSUPPORTED,
                                   "no CUDA toolkit found (nvcc on PATH, CUDA_HOME, /usr/local/cuda*)"));
    wanted list[MAX_TARGETS];
    size_t n = 0;
    if (req->kind == MD_ARCH_SPEC_ALL) {
        st = wanted_all(req->toolkits, req->n_toolkits, req->recipe->ptx, list, &n, err);
    } else if (req->kind == MD_ARCH_SPEC_NATIVE) {
        if (req->n_native == 0)
            return md_fail(err, MD_ERR_UNSUPPORTED, "native: no GPU found on this machine");
        for (size_t i = 0; i < req->n_native; i++)
            add_wanted(list, &n, req->native_sms[i], false);
    } else {
        st = wanted_list(req->arch_spec, req->toolkits, req->n_toolkits, list, &n, err);
    }
    if (st != MD_OK)
        return st;
    qsort(list, n, sizeof *list, compare_wanted);

    out->toolkits = malloc(req->n_toolkits * sizeof *out->toolkits);
    /* Each SASS architecture may get a second toolkit's SASS, and some the old drivers' PTX. */
    out->targets = calloc(2 * n + MD_MAX_OLD_PTX + 1, sizeof *out->targets);
    if (!out->toolkits || !out->targets) {
        md_plan_free(out);
        return md_fail(err, MD_ERR_NOMEM, "out of memory");
    }
    memcpy(out->toolkits, req->toolkits, req->n_toolkits * sizeof *req->toolkits);
    out->n_toolkits = req->n_toolkits;

    char unsupported[512] = "";
    for (size_t i = 0; i < n; i++) {
        const md_toolkit *tk = NULL;
        for (size_t t = 0; t < out->n_toolkits && !tk; t++) /* newest first */
            if (md_toolkit_supports(&out->toolkits[t], list[i].sm))
                tk = &out->toolkits[t];
        const md_toolkit *loads = native_loader(out, req, list[i].sm);
        if (loads) { /* native: the one image this machine's driver runs, no second toolkit's */
            if ((st = add_target(out, req, list[i].sm, false, loads, 0, err)) != MD_OK) {
                md_plan_free(out);
                return st;
            }
            continue;
        }
        if (!tk) {
            char who[64], found[128] = "";
            md_toolkits_supporting(list[i].sm, who, sizeof who);
            for (size_t t = 0; t < req->n_toolkits; t++)
                snprintf(found + strlen(found), sizeof found - strlen(found), "%s%s", t ? ", " : "",
                         req->toolkits[t].version);
            snprintf(unsupported + strlen(unsupported), sizeof unsupported - strlen(unsupported),
                     "%ssm_%u needs %s; found %s", unsupported[0] ? "; " : "", list[i].sm,
                     who[0] ? who : "a toolkit that targets it", found);
            if (!list[i].ptx)
                add_fetch(out, req->toolkits, req->n_toolkits, list[i].sm);
            continue;
        }
        st = add_target(out, req, list[i].sm, list[i].ptx, tk, 0, err);
        const md_toolkit *reach = list[i].ptx ? NULL : lowest_driver_toolkit(out, list[i].sm);
        if (st == MD_OK && reach && reach != tk && (req->recipe->sass & MD_SASS_LOWEST_DRIVER) &&
            md_sass_needs_cuda(reach->major, reach->minor) < md_sass_needs_cuda(tk->major, tk->minor))
            st = add_target(out, req, list[i].sm, false, reach, 0, err);
        if (st != MD_OK) {
            md_plan_free(out);
            return st;
        }
    }
    st = add_old_driver_ptx(out, req, list, n, err);
    if (st != MD_OK) {
        md_plan_free(out);
        return st;
    }
    if (unsupported[0]) {
        char fetch[160] = "";
        for (size_t i = 0; i < out->n_fetch; i++)
            snprintf(fetch + strlen(fetch), sizeof fetch - strlen(fetch), "%smsda-doctor fetch --cuda %s",
                     i ? ", " : " (to fetch one: ", out->fetch[i].release);
        if (fetch[0])
            snprintf(fetch + strlen(fetch), sizeof fetch - strlen(fetch), ")");
        md_plan_fetch kept[MD_PLAN_MAX_FETCH];
        size_t n_kept = out->n_fetch;
        memcpy(kept, out->fetch, sizeof kept);
        md_plan_free(out);
        memcpy(out->fetch, kept, sizeof kept);
        out->n_fetch = n_kept;
        return md_hint_set(err, MD_HINT_TOOLKIT, md_fail(err, MD_ERR_UNSUPPORTED, "%s%s", unsupported, fetch));
    }
    note_unknown(out);
    if (req->kind == MD_ARCH_SPEC_ALL)
        note_fetchable(out, out->toolkits, out->n_toolkits);
    return MD_OK;
}

void md_plan_free(md_plan *plan)
{
    free(plan->toolkits);
    free(plan->targets);
    memset(plan, 0, sizeof *plan);
}
