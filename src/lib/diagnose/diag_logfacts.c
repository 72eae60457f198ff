/* What a log says about the machine it came from (recipes/signatures.json, log_facts and
 * log_hints), and whether that machine is this one. */
#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "recipes/arch.h"
#include "diag_internal.h"
#include "recipes/driver_table.h"
#include "recipes/toolkit_table.h"

typedef enum {
    LF_HOST, LF_GPU_NAME, LF_CC, LF_TORCH, LF_TORCH_CUDA, LF_NVCC, LF_GCC, LF_DRIVER, LF_DRIVER_CUDA, LF_GENCODE, LF_ARCH_LIST
} lf_kind;

static const struct {
    const char *name;
    lf_kind kind;
} log_fact_names[] = {
    { "compute_capability", LF_CC }, { "driver_cuda", LF_DRIVER_CUDA }, { "driver_version", LF_DRIVER },
    { "gcc_version", LF_GCC },
    { "gencode", LF_GENCODE },        { "gpu_name", LF_GPU_NAME },    { "host", LF_HOST },
    { "nvcc_version", LF_NVCC },      { "torch_cuda", LF_TORCH_CUDA }, { "torch_cuda_arch_list", LF_ARCH_LIST },
    { "torch_version", LF_TORCH },
};

static bool kind_of(const char *name, lf_kind *out)
{
    for (size_t i = 0; i < sizeof log_fact_names / sizeof log_fact_names[0]; i++)
        if (strcmp(log_fact_names[i].name, name) == 0) {
            *out = log_fact_names[i].kind;
            return true;
        }
    return false;
}

bool md_vocab_log_fact(const char *name)
{
    lf_kind k;
    return kind_of(name, &k);
}

static void add_build(md_log_facts *lf, unsigned sm, bool ptx)
{
    for (size_t i = 0; i < lf->n_build; i++)
        if (lf->build_sms[i] == sm && lf->build_ptx[i] == ptx)
            return;
    if (sm && lf->n_build < MD_LOG_MAX_ARCHS) {
        lf->build_sms[lf->n_build] = sm;
        lf->build_ptx[lf->n_build++] = ptx;
    }
}

/* An architecture list in any of its notations, each entry a target: TORCH_CUDA_ARCH_LIST's
 * "6.1;7.5+PTX" or "8.6 9.0", CMake's "86;89-virtual", nvcc's "sm_86,compute_86" and
 * "[sm_86,compute_86]". +PTX, -virtual and compute_ give PTX, the others SASS. */
static void parse_arch_list(md_log_facts *lf, const char *text)
{
    static const char separators[] = "; ,[]'\"\t";
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, separators);
        char entry[32];
        snprintf(entry, sizeof entry, "%.*s", (int)(len < sizeof entry ? len : sizeof entry - 1), p);
        unsigned ma, mi;
        char *end;
        if (strncmp(entry, "sm_", 3) == 0 && isdigit((unsigned char)entry[3]))
            add_build(lf, (unsigned)strtoul(entry + 3, NULL, 10), false);
        else if (strncmp(entry, "compute_", 8) == 0 && isdigit((unsigned char)entry[8]))
            add_build(lf, (unsigned)strtoul(entry + 8, NULL, 10), true);
        else if (sscanf(entry, "%u.%u", &ma, &mi) == 2 && ma < 100 && mi < 10) {
            add_build(lf, ma * 10 + mi, false);
            if (strstr(entry, "+PTX"))
                add_build(lf, ma * 10 + mi, true);
        } else if (isdigit((unsigned char)entry[0])) { /* CMake: 86, 86-real, 86-virtual */
            unsigned long sm = strtoul(entry, &end, 10);
            if (sm >= 10 && sm < 1000 && (*end == '\0' || *end == '-'))
                add_build(lf, (unsigned)sm, strcmp(end, "-virtual") == 0);
        }
        p += len + (p[len] != '\0');
    }
}

/* Every match of SPEC in the kept line KEPT: the spec's group is a list of targets. */
static void gencode_line(const md_knowledge *kb, md_log_facts *lf, const md_capture_spec *spec, const char *kept)
{
    char text[2 * MD_LOG_TEXT_MAX];
    md_log_normalise(&kb->matcher.wording, kept, strlen(kept), text, sizeof text);
    for (size_t p = 0; p < spec->n_compiled; p++) {
        const regex_t *re = &spec->compiled[p];
        regmatch_t g[10];
        int n = spec->group[p];
        for (const char *at = text; regexec(re, at, 10, g, 0) == 0 && g[0].rm_eo > 0; at += g[0].rm_eo) {
            if (g[n].rm_so < 0)
                continue;
            char targets[128];
            snprintf(targets, sizeof targets, "%.*s", (int)(g[n].rm_eo - g[n].rm_so), at + g[n].rm_so);
            parse_arch_list(lf, targets);
        }
    }
}

/* "12.2" or the driver API's "12020" as 12020; 0 when it is neither. */
static int driver_cuda_of_text(const char *text)
{
    if (strchr(text, '.'))
        return md_cuda_version_parse(text) > 0 ? md_cuda_version_parse(text) : 0;
    char *end;
    long v = strtol(text, &end, 10);
    return *end == '\0' && v >= 1000 && v < 100000 ? (int)v : 0;
}

/* The first value SPEC reads from the kept lines, in the form the patterns matched (lognorm.h). */
static bool first_value(const md_knowledge *kb, const md_capture_spec *spec, const md_log_group_hits *h, char *out,
                        size_t size)
{
    for (size_t p = 0; p < spec->n_compiled; p++) {
        const regex_t *re = &spec->compiled[p];
        bool found = false;
        for (size_t i = 0; i < h->n_hits && !found; i++) {
            regmatch_t g[10];
            int n = spec->group[p];
            char text[2 * MD_LOG_TEXT_MAX];
            md_log_normalise(&kb->matcher.wording, h->hits[i].text, strlen(h->hits[i].text), text, sizeof text);
            if (regexec(re, text, 10, g, 0) == 0 && g[n].rm_so >= 0) {
                snprintf(out, size, "%.*s", (int)(g[n].rm_eo - g[n].rm_so), text + g[n].rm_so);
                found = true;
            }
        }
        if (found)
            return true;
    }
    return false;
}

void md_log_facts_read(const md_knowledge *kb, const md_log_result *r, md_log_facts *lf)
{
    memset(lf, 0, sizeof *lf);
    for (size_t i = 0; i < kb->n_log_facts; i++) {
        const md_named_patterns *np = &kb->log_facts[i];
        const md_log_group_hits *h = &r->groups[np->group];
        lf_kind kind;
        if (h->count == 0 || !kind_of(np->spec.name, &kind))
            continue;
        char value[128] = "";
        if (kind == LF_GENCODE) {
            for (size_t k = 0; k < h->n_hits; k++)
                gencode_line(kb, lf, &np->spec, h->hits[k].text);
            continue;
        }
        if (!first_value(kb, &np->spec, h, value, sizeof value))
            continue;
        switch (kind) {
        case LF_HOST: snprintf(lf->host, sizeof lf->host, "%s", value); break;
        case LF_GPU_NAME: snprintf(lf->gpu_name, sizeof lf->gpu_name, "%s", value); break;
        case LF_CC: { /* "8.6", torch's tuple "8, 6", or "86" */
            unsigned ma, mi;
            lf->sm = sscanf(value, "%u.%u", &ma, &mi) == 2 || sscanf(value, "%u, %u", &ma, &mi) == 2
                         ? ma * 10 + mi : (unsigned)strtoul(value, NULL, 10);
            break;
        }
        case LF_TORCH: snprintf(lf->torch_version, sizeof lf->torch_version, "%s", value); break;
        case LF_TORCH_CUDA: snprintf(lf->torch_cuda, sizeof lf->torch_cuda, "%s", value); break;
        case LF_NVCC: snprintf(lf->nvcc_version, sizeof lf->nvcc_version, "%s", value); break;
        case LF_GCC: snprintf(lf->gcc_version, sizeof lf->gcc_version, "%s", value); break;
        case LF_DRIVER: snprintf(lf->driver, sizeof lf->driver, "%s", value); break;
        case LF_DRIVER_CUDA: lf->driver_cuda = driver_cuda_of_text(value); break;
        case LF_ARCH_LIST:
            snprintf(lf->arch_list, sizeof lf->arch_list, "%s", value);
            parse_arch_list(lf, value);
            break;
        case LF_GENCODE: break;
        }
    }
    /* the driver's CUDA version from its release where the log does not say it: 535.104.05 runs 12.2 */
    md_driver driver;
    md_error driver_err;
    if (!lf->driver_cuda && lf->driver[0] && md_driver_parse(lf->driver, &driver, &driver_err) == MD_OK)
        lf->driver_cuda = driver.cuda;
    /* a torch wheel's local version names its CUDA: 2.1.0+cu121 is CUDA 12.1 */
    const char *cu = strstr(lf->torch_version, "+cu");
    if (!lf->torch_cuda[0] && cu && strlen(cu + 3) >= 3 && isdigit((unsigned char)cu[3]))
        snprintf(lf->torch_cuda, sizeof lf->torch_cuda, "%.*s.%c", (int)strlen(cu + 3) - 1, cu + 3, cu[3 + strlen(cu + 3) - 1]);
    /* the GPU's name alone, where the architecture table knows it */
    if (!lf->sm && lf->gpu_name[0]) {
        const char *last = strrchr(lf->gpu_name, ' ');
        md_gpu_target t;
        md_error err;
        if (md_gpu_target_parse(last ? last + 1 : lf->gpu_name, &t, &err) == MD_OK)
            lf->sm = t.arch->sm;
    }
    for (size_t i = 0; i < kb->n_hints && i < MD_KB_MAX_NAMED; i++)
        lf->hints[i] = r->groups[kb->hints[i].group].count > 0;
}

/* ---- this machine or another ---------------------------------------------------------------- */

static bool contains_ci(const char *hay, const char *needle)
{
    return strcasestr(hay, needle) != NULL;
}

/* Whether two torch versions name one build: the same public version, and the same local
 * version where both give one. pip list and conda list print 2.1.2 where torch.__version__ is
 * 2.1.2+cu121: the log's row is this machine's torch, not another's. */
static bool same_torch_version(const char *a, const char *b)
{
    size_t pa = strcspn(a, "+"), pb = strcspn(b, "+");
    return pa == pb && strncmp(a, b, pa) == 0 && (!a[pa] || !b[pb] || strcmp(a + pa, b + pb) == 0);
}

static void compare(md_log_info *log, const char *fact, const char *logged, const char *machine, bool same,
                    unsigned weight, unsigned *same_w, unsigned *differ_w)
{
    if (log->n_compared == MD_LOG_MAX_COMPARED)
        return;
    md_log_comparison *c = &log->compared[log->n_compared++];
    c->fact = fact;
    snprintf(c->log, sizeof c->log, "%s", logged);
    snprintf(c->machine, sizeof c->machine, "%s", machine);
    c->same = same;
    *(same ? same_w : differ_w) += weight;
}

static bool machine_host(const md_machine *m, char *out, size_t size)
{
    if (m->root && *m->root) {
        char path[PATH_MAX];
        md_rooted(m, "/etc/hostname", path, sizeof path);
        FILE *in = fopen(path, "r");
        if (!in)
            return false;
        bool ok = fgets(out, (int)size, in) != NULL;
        fclose(in);
        out[strcspn(out, "\r\n")] = '\0';
        return ok && out[0];
    }
    return gethostname(out, size) == 0 && out[0];
}

void md_log_compare(const md_machine *m, md_log_info *log)
{
    const md_log_facts *lf = &log->facts;
    unsigned same = 0, differ = 0;
    log->n_compared = 0;
    char text[192];
    if (lf->host[0] && machine_host(m, text, sizeof text))
        compare(log, "host", lf->host, text, strcmp(lf->host, text) == 0, 2, &same, &differ);
    if (lf->gpu_name[0]) {
        bool any = false;
        size_t at = 0;
        text[0] = '\0';
        for (size_t g = 0; g < m->n_gpus; g++) {
            any |= contains_ci(m->gpus[g].name, lf->gpu_name) || contains_ci(lf->gpu_name, m->gpus[g].name);
            at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", g ? ", " : "", m->gpus[g].name);
            if (at >= sizeof text)
                break;
        }
        compare(log, "gpu_name", lf->gpu_name, m->n_gpus ? text : "no GPU", any, 2, &same, &differ);
    }
    if (lf->sm) {
        bool any = false;
        size_t at = 0;
        text[0] = '\0';
        for (size_t g = 0; g < m->n_gpus && at < sizeof text; g++) {
            any |= m->gpus[g].sm == lf->sm;
            at += (size_t)snprintf(text + at, sizeof text - at, "%ssm_%u", g ? ", " : "", m->gpus[g].sm);
        }
        char logged[16];
        snprintf(logged, sizeof logged, "sm_%u", lf->sm);
        compare(log, "compute_capability", logged, m->n_gpus ? text : "no GPU", any, 1, &same, &differ);
    }
    if (lf->driver[0] && m->driver_release[0])
        compare(log, "driver_version", lf->driver, m->driver_release, strcmp(lf->driver, m->driver_release) == 0, 2,
                &same, &differ);
    if (lf->torch_version[0] && m->py.ran)
        compare(log, "torch_version", lf->torch_version, m->py.has_torch ? m->py.torch_version : "no torch",
                m->py.has_torch && same_torch_version(lf->torch_version, m->py.torch_version), 1, &same, &differ);
    if (lf->torch_cuda[0] && m->py.has_torch)
        compare(log, "torch_cuda", lf->torch_cuda, m->py.torch_cuda[0] ? m->py.torch_cuda : "none (CPU build)",
                strcmp(lf->torch_cuda, m->py.torch_cuda) == 0, 1, &same, &differ);
    if (lf->nvcc_version[0]) {
        bool any = false;
        size_t at = 0;
        text[0] = '\0';
        for (size_t i = 0; i < m->n_toolkits && at < sizeof text; i++) {
            any |= strcmp(m->toolkits[i].version, lf->nvcc_version) == 0;
            at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", i ? ", " : "", m->toolkits[i].version);
        }
        compare(log, "nvcc_version", lf->nvcc_version, m->n_toolkits ? text : "no nvcc", any, 1, &same, &differ);
    }
    if (lf->gcc_version[0] && m->n_compilers) {
        unsigned major = (unsigned)strtoul(lf->gcc_version, NULL, 10);
        bool any = false;
        size_t at = 0;
        text[0] = '\0';
        for (size_t i = 0; i < m->n_compilers && at < sizeof text; i++) {
            any |= m->compilers[i].major == major;
            at += (size_t)snprintf(text + at, sizeof text - at, "%sgcc %u", i ? ", " : "", m->compilers[i].major);
        }
        compare(log, "gcc_version", lf->gcc_version, text, any, 1, &same, &differ);
    }
    log->origin = differ > same ? MD_ORIGIN_ELSEWHERE : same > 0 ? MD_ORIGIN_HERE : MD_ORIGIN_UNKNOWN;
}
