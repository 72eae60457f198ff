/* msda-doctor diagnose: a doctor's checklist of this machine, then what the logs say went wrong,
 * why, and the commands that fix it. Text and --json come from the same structures. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "recipes/arch.h"
#include "cli.h"
#include "diagnose/diagnose.h"

#define MAX_SEARCH 16

typedef struct {
    bool json, verbose, list, utf8, colour;
    md_diagnose_options probe;
    const char *search[MAX_SEARCH];
} diagnose_options;

/* ---- text ------------------------------------------------------------------------------------ */

typedef struct {
    const char *ok, *warn, *fail, *skip;     /* row marks */
    const char *problem, *hint, *detail;     /* line marks */
    const char *green, *yellow, *red, *reset;
} marks;

static marks marks_for(const diagnose_options *o)
{
    marks m = { "[v]", "[!]", "[x]", "[-]", "x", "!", "-", "", "", "", "" };
    if (o->utf8) {
        m.ok = "[\xe2\x9c\x93]";
        m.fail = "[\xe2\x9c\x97]";
        m.problem = "\xe2\x9c\x97";
        m.detail = "\xe2\x80\xa2";
    }
    if (o->colour) {
        m.green = "\x1b[32m";
        m.yellow = "\x1b[33m";
        m.red = "\x1b[31m";
        m.reset = "\x1b[0m";
    }
    return m;
}

static void print_check(const md_check *c, const marks *mk, bool verbose)
{
    const char *mark = mk->ok, *colour = mk->green;
    switch (c->status) {
    case MD_CHECK_OK: break;
    case MD_CHECK_WARN: mark = mk->warn; colour = mk->yellow; break;
    case MD_CHECK_FAIL:
    case MD_CHECK_ERROR: mark = mk->fail; colour = mk->red; break;
    case MD_CHECK_SKIPPED: mark = mk->skip; colour = ""; break;
    }
    printf("%s%s%s %s: %s%s\n", colour, mark, *colour ? mk->reset : "", c->name,
           c->status == MD_CHECK_ERROR ? "the check itself failed: " : "", MD_SHOWN(c->summary));
    for (size_t i = 0; i < c->n_lines; i++) {
        const md_check_line *l = &c->lines[i];
        if (l->kind == MD_LINE_DETAIL && !verbose)
            continue;
        const char *lm = l->kind == MD_LINE_PROBLEM ? mk->problem : l->kind == MD_LINE_HINT ? mk->hint : mk->detail;
        printf("    %s %s\n", lm, MD_SHOWN(l->text));
    }
    if (c->hint)
        printf("    %s %s\n", mk->hint, md_cli_hint_words(c->hint));
}

static void print_keys(const char *label, const char *const *keys, size_t n)
{
    if (!n)
        return;
    printf("      %s:", label);
    for (size_t i = 0; i < n; i++)
        printf(" %s", keys[i]);
    putchar('\n');
}

static void print_finding(const md_diagnosis *d, const md_finding *f, const marks *mk, bool verbose)
{
    bool error = strcmp(f->sig->severity, "error") == 0;
    const char *where = !f->from_log ? " (found by the probes on this machine)"
                        : f->on_machine ? "" : " (judged by the log alone)";
    printf("%s%s%s %s: %s%s\n", error ? mk->red : mk->yellow, error ? mk->fail : mk->warn,
           *mk->red ? mk->reset : "", f->sig->id, f->sig->title, where);
    printf("    Cause: %s\n", MD_SHOWN(f->cause));
    if (f->n_causes > 1) {
        printf("    The message has %zu readings, most likely first:\n", f->n_causes);
        for (size_t i = 0; i < f->n_causes; i++) {
            const md_finding_cause *c = &f->causes[i];
            printf("      %zu. %s: %s\n", i + 1, c->sig->id, MD_SHOWN(c->text));
            print_keys("   for", c->pro, c->n_pro);
            print_keys("   against", c->con, c->n_con);
        }
    }
    printf("    Evidence:\n");
    for (size_t i = 0; i < f->n_evidence; i++)
        printf("      %s\n", MD_SHOWN(f->evidence[i]));
    print_keys(f->on_machine ? "confirmed on this machine" : "confirmed by the log", f->confirmed, f->n_confirmed);
    print_keys(f->on_machine ? "this machine argues against it" : "the log argues against it", f->ruled_out,
               f->n_ruled_out);
    if (f->n_fix) {
        printf("    Fix:\n");
        for (size_t i = 0; i < f->n_fix; i++)
            printf("      %s\n", MD_SHOWN(f->fix[i]));
    }
    for (size_t i = 0; i < f->n_notes; i++)
        printf("    %s %s\n", mk->hint, MD_SHOWN(f->notes[i]));
    if (verbose && f->from_log)
        for (size_t i = 1; i < f->hits.n_hits; i++)
            printf("    %s %s:%llu: %s\n", mk->detail, MD_SHOWN(d->logs[f->log_index].name), f->hits.hits[i].line,
                   MD_SHOWN(f->hits.hits[i].text));
}

static void print_log(const md_log_info *l, const marks *mk)
{
    const char *name = MD_SHOWN(l->name);
    printf("%s Log %s: %llu lines", mk->detail, name, l->lines);
    if (l->long_lines)
        printf(", %llu cut at %d bytes", l->long_lines, MD_LOG_LINE_MAX);
    if (l->n_findings == 0)
        printf("; no known failure in %s\n", name);
    else
        printf("; %zu finding%s\n", l->n_findings, l->n_findings == 1 ? "" : "s");
    const char *origin = l->origin == MD_ORIGIN_HERE ? "this machine"
                         : l->origin == MD_ORIGIN_ELSEWHERE ? "another machine" : "cannot tell";
    if (l->n_compared || l->foreign)
        printf("    came from: %s%s\n", origin,
               l->foreign ? "; judged by the log alone, this machine's findings kept apart" : "");
    for (size_t i = 0; i < l->n_compared; i++)
        printf("      %s %s: log '%s', this machine '%s'\n", l->compared[i].same ? "=" : "x", l->compared[i].fact,
               MD_SHOWN(l->compared[i].log), MD_SHOWN(l->compared[i].machine));
}

static void print_text(const md_diagnosis *d, const diagnose_options *o)
{
    marks mk = marks_for(o);
    size_t problems = 0, warnings = 0;
    for (size_t i = 0; i < d->n_checks; i++) {
        print_check(&d->checks[i], &mk, o->verbose);
        problems += md_check_is_problem(d->checks[i].status);
        warnings += d->checks[i].status == MD_CHECK_WARN;
    }
    if (!d->probed)
        printf("%s Machine not probed (--no-probe)\n", mk.skip);
    bool foreign = false;
    for (size_t i = 0; i < d->n_logs; i++) {
        print_log(&d->logs[i], &mk);
        foreign |= d->logs[i].foreign;
    }
    bool apart = false;
    for (size_t i = 0; i < d->n_findings; i++) {
        const md_finding *f = &d->findings[i];
        if (foreign && !f->from_log && !apart) {
            printf("\nOn this machine, apart from the logs:\n");
            apart = true;
        }
        putchar('\n');
        print_finding(d, f, &mk, o->verbose);
    }
    putchar('\n');
    /* the same rule as the exit status: warnings are counted apart from the problems */
    char warned[48] = "";
    if (warnings)
        snprintf(warned, sizeof warned, "; %zu warning%s", warnings, warnings == 1 ? "" : "s");
    if (problems + d->n_findings == 0)
        printf("%s No issues found%s%s\n", mk.detail, warned, warnings ? "." : "!");
    else if (d->n_findings)
        printf("! %zu finding%s; problems in %zu check%s%s.\n", d->n_findings, d->n_findings == 1 ? "" : "s",
               problems, problems == 1 ? "" : "s", warned);
    else
        printf("! Found problems in %zu categor%s%s.\n", problems, problems == 1 ? "y" : "ies", warned);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static json_t *strings(const char *const *items, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(items[i]));
    return a;
}

/* Texts here may come from files and logs: their bytes go out as they are (md_cli_json_bytes). */
static json_t *text_or_null(const char *s)
{
    return s && *s ? md_cli_json_bytes(s) : json_null();
}

static json_t *tri(int v)
{
    return v < 0 ? json_null() : json_boolean(v);
}

static json_t *count_or_null(int v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *json_check(const md_check *c)
{
    json_t *lists[3] = { json_array(), json_array(), json_array() };
    for (size_t i = 0; i < c->n_lines; i++)
        json_array_append_new(lists[c->lines[i].kind], md_cli_json_bytes(c->lines[i].text));
    if (c->hint)
        json_array_append_new(lists[MD_LINE_HINT], json_string(md_cli_hint_words(c->hint)));
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "id", c->id, "name", c->name, "status",
                     md_check_status_name(c->status), "summary", md_cli_json_bytes(c->summary), "problems", lists[MD_LINE_PROBLEM],
                     "hints", lists[MD_LINE_HINT], "details", lists[MD_LINE_DETAIL]);
}

static json_t *json_finding(const md_diagnosis *d, const md_finding *f)
{
    json_t *ev = json_array(), *fix = json_array(), *notes = json_array(), *causes = json_array();
    for (size_t i = 0; i < f->n_evidence; i++)
        json_array_append_new(ev, md_cli_json_bytes(f->evidence[i]));
    for (size_t i = 0; i < f->n_fix; i++)
        json_array_append_new(fix, md_cli_json_bytes(f->fix[i]));
    for (size_t i = 0; i < f->n_notes; i++)
        json_array_append_new(notes, md_cli_json_bytes(f->notes[i]));
    for (size_t i = 0; i < f->n_causes; i++) {
        const md_finding_cause *c = &f->causes[i];
        json_array_append_new(causes, json_pack("{s:s, s:o, s:i, s:o, s:o}", "id", c->sig->id, "cause", md_cli_json_bytes(c->text),
                                                "score", c->score, "for", strings(c->pro, c->n_pro), "against",
                                                strings(c->con, c->n_con)));
    }
    json_t *log = f->from_log ? json_pack("{s:o, s:I, s:I}", "file", md_cli_json_bytes(d->logs[f->log_index].name), "line",
                                          (json_int_t)f->first_line, "count", (json_int_t)f->count)
                              : json_null();
    const char *judged = !f->from_log ? "machine" : f->on_machine ? "log-and-machine" : "log";
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o}", "id", f->sig->id,
                     "severity", f->sig->severity, "title", f->sig->title, "cause", md_cli_json_bytes(f->cause), "evidence", ev, "fix",
                     fix, "notes", notes, "source", f->from_log ? "log" : "probe", "judged_on", judged, "matched",
                     f->matched->id, "causes", causes, "log", log, "gpu", f->gpu >= 0 ? json_integer(f->gpu) : json_null(),
                     "confirmed_by", strings(f->confirmed, f->n_confirmed), "ruled_out_by",
                     strings(f->ruled_out, f->n_ruled_out), "ambiguous_with",
                     f->tied_with ? json_string(f->tied_with->id) : json_null());
}

static json_t *json_log(const md_log_info *l)
{
    const md_log_facts *lf = &l->facts;
    json_t *build = json_array(), *compared = json_array();
    for (size_t i = 0; i < lf->n_build; i++) {
        char name[24];
        snprintf(name, sizeof name, "%s_%u", lf->build_ptx[i] ? "compute" : "sm", lf->build_sms[i]);
        json_array_append_new(build, json_string(name));
    }
    for (size_t i = 0; i < l->n_compared; i++)
        json_array_append_new(compared, json_pack("{s:s, s:o, s:o, s:b}", "fact", l->compared[i].fact, "log",
                                                  md_cli_json_bytes(l->compared[i].log), "machine",
                                                  md_cli_json_bytes(l->compared[i].machine), "same",
                                                  l->compared[i].same));
    char cc[16] = "";
    if (lf->sm)
        snprintf(cc, sizeof cc, "%u.%u", lf->sm / 10, lf->sm % 10);
    char driver_cuda[16] = "";
    if (lf->driver_cuda > 0)
        md_cuda_version_text(lf->driver_cuda, driver_cuda, sizeof driver_cuda);
    json_t *facts = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "host", text_or_null(lf->host),
                              "gpu_name", text_or_null(lf->gpu_name), "compute_capability", text_or_null(cc),
                              "torch_version", text_or_null(lf->torch_version), "torch_cuda", text_or_null(lf->torch_cuda),
                              "nvcc_version", text_or_null(lf->nvcc_version), "gcc_version", text_or_null(lf->gcc_version),
                              "driver_version", text_or_null(lf->driver), "driver_cuda", text_or_null(driver_cuda),
                              "build_archs", build, "torch_cuda_arch_list",
                              text_or_null(lf->arch_list));
    return json_pack("{s:o, s:I, s:I, s:I, s:I, s:s, s:b, s:o, s:o}", "file", md_cli_json_bytes(l->name), "lines", (json_int_t)l->lines,
                     "bytes", (json_int_t)l->bytes, "long_lines", (json_int_t)l->long_lines, "findings",
                     (json_int_t)l->n_findings, "origin", md_log_origin_name(l->origin), "foreign", l->foreign, "facts",
                     facts, "compared", compared);
}

static json_t *arch_names(const unsigned *sms, size_t n, bool ptx)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        char name[24];
        md_arch_format(name, sizeof name, ptx, sms[i], 0);
        json_array_append_new(a, json_string(name));
    }
    return a;
}

static json_t *json_machine(const md_diagnosis *d)
{
    const md_machine *m = d->machine;
    json_t *gpus = json_array();
    for (size_t i = 0; i < m->n_gpus; i++) {
        const md_machine_gpu *g = &m->gpus[i];
        char arch[24], cc[16];
        md_arch_format(arch, sizeof arch, false, g->sm, 0);
        snprintf(cc, sizeof cc, "%u.%u", g->sm / 10, g->sm % 10);
        json_array_append_new(gpus, json_pack("{s:I, s:o, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "index", (json_int_t)i,
                                              "name", md_cli_json_bytes(g->name), "arch", arch, "compute_capability", cc,
                                              "multiprocessors", (json_int_t)g->multiprocessors, "registers_per_block",
                                              (json_int_t)g->registers_per_block, "max_threads_per_block",
                                              (json_int_t)g->max_threads_per_block, "memory_bytes",
                                              (json_int_t)g->memory_bytes, "source", g->source));
    }
    char cuda[16];
    md_cuda_version_text(m->driver.driver_version, cuda, sizeof cuda);
    json_t *driver = json_pack("{s:b, s:o, s:o, s:I, s:o, s:o}", "loaded", m->driver_loaded, "library",
                               md_cli_json_bytes(m->driver.library), "cuda", m->driver.driver_version > 0 ? json_string(cuda) : json_null(),
                               "api_version", (json_int_t)m->driver.driver_version, "release",
                               text_or_null(m->driver_release), "error", text_or_null(m->driver_error));
    json_t *smi_gpus = json_array();
    for (size_t i = 0; i < m->smi.n_gpus; i++) {
        const md_smi_gpu *g = &m->smi.gpus[i];
        char cc[16];
        snprintf(cc, sizeof cc, "%u.%u", g->sm / 10, g->sm % 10);
        json_array_append_new(smi_gpus, json_pack("{s:o, s:o, s:I}", "name", md_cli_json_bytes(g->name), "compute_capability",
                                                  g->has_sm ? json_string(cc) : json_null(), "memory_mib",
                                                  (json_int_t)g->memory_mib));
    }
    json_t *smi = json_pack("{s:b, s:o, s:b, s:b, s:o, s:o, s:o}", "found", m->smi.found, "path",
                            text_or_null(m->smi.found ? m->smi.path : ""), "answered", m->smi.answered,
                            "compute_cap_fallback", m->smi.compute_cap_fallback, "driver",
                            text_or_null(m->smi.driver_release), "gpus", smi_gpus, "error", text_or_null(m->smi.error));
    json_t *jetson = json_null();
    if (m->jetson.present) {
        char arch[24] = "";
        if (m->jetson.sm)
            md_arch_format(arch, sizeof arch, false, m->jetson.sm, 0);
        jetson = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:I}", "l4t", text_or_null(m->jetson.l4t), "jetpack",
                           text_or_null(m->jetson.jetpack), "cuda", text_or_null(m->jetson.cuda), "model",
                           text_or_null(m->jetson.model), "module", text_or_null(m->jetson.module), "arch",
                           text_or_null(arch), "registers_per_block", (json_int_t)m->jetson.registers_per_block);
    }
    json_t *toolkits = json_array();
    for (size_t i = 0; i < m->n_toolkits; i++) {
        const md_toolkit *tk = &m->toolkits[i];
        char min[32];
        md_toolkit_min_driver(tk, min, sizeof min);
        json_array_append_new(toolkits, json_pack("{s:o, s:o, s:o, s:I, s:o, s:b}", "version", md_cli_json_bytes(tk->version), "nvcc",
                                                  md_cli_json_bytes(tk->nvcc), "archs", arch_names(tk->sms, tk->n_sms, false), "max_gcc",
                                                  (json_int_t)tk->max_gcc, "min_driver", text_or_null(min),
                                                  "used_for_builds", tk == m->build_toolkit));
    }
    json_t *gxx = m->default_compiler ? json_pack("{s:o, s:I}", "path", md_cli_json_bytes(m->default_compiler->path), "gcc",
                                                  (json_int_t)m->default_compiler->major)
                                      : json_null();
    json_t *python = json_null();
    if (m->py.ran)
        python = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "python", md_cli_json_bytes(m->py.python),
                           "executable", md_cli_json_bytes(m->py.executable), "version",
                           md_cli_json_bytes(m->py.version), "torch",
                           text_or_null(m->py.has_torch ? m->py.torch_version : ""), "torch_cuda",
                           text_or_null(m->py.torch_cuda), "torch_lib", text_or_null(m->py.torch_lib_dir), "cxx11_abi",
                           tri(m->py.cxx11_abi), "has_magma", tri(m->py.has_magma), "msda_importable",
                           m->py.msda_importable);
    if (json_is_object(python)) {
        /* {"transformers": "5.24.0", ...}: null where the version could not be read */
        json_t *fws = json_object();
        for (size_t i = 0; i < m->py.n_frameworks; i++)
            json_object_set_new(fws, m->py.frameworks[i].name, text_or_null(m->py.frameworks[i].version));
        json_object_set_new(python, "frameworks", fws);
    }
    static const char *const kinds[] = { "extension", "msda-wheel", "other-op" };
    json_t *bins = json_array();
    for (size_t b = 0; b < m->n_binaries; b++) {
        const md_binary_facts *bf = &m->binaries[b];
        json_t *on = json_array();
        for (size_t g = 0; g < m->n_gpus && bf->readable && bf->n_sass + bf->n_ptx; g++) {
            const md_binary_on_gpu *o = &bf->on_gpu[g];
            char code[24];
            md_arch_format(code, sizeof code, o->how == MD_RUNS_PTX_JIT, o->code_sm, o->code_variant);
            json_array_append_new(on, json_pack("{s:I, s:s, s:o, s:I, s:o}", "gpu", (json_int_t)g, "runs",
                                                md_runs_how_name(o->how), "code",
                                                o->how == MD_RUNS_NOT ? json_null() : json_string(code),
                                                "kernels_not_fitting", (json_int_t)o->n_not_fitting,
                                                "max_threads_that_fit",
                                                o->n_not_fitting ? json_integer(o->max_threads_that_fit) : json_null()));
        }
        json_t *symbols = json_pack("{s:o, s:o, s:o, s:o, s:o}", "torch_imported", count_or_null(bf->torch_imports),
                                    "torch_missing", count_or_null(bf->torch_missing), "first_missing",
                                    text_or_null(bf->missing_symbol), "needs_torch_python", tri(bf->needs_torch_python),
                                    "links_torch_python", tri(bf->links_torch_python));
        json_array_append_new(bins, json_pack("{s:o, s:s, s:o, s:o, s:o, s:o, s:o}", "path", md_cli_json_bytes(bf->path), "kind",
                                              kinds[bf->kind], "sass", arch_names(bf->sass_sms, bf->n_sass, false),
                                              "ptx", arch_names(bf->ptx_sms, bf->n_ptx, true), "error",
                                              text_or_null(bf->error), "gpus", on, "host_symbols", symbols));
    }
    json_t *cudnn = json_array();
    for (size_t i = 0; i < m->n_cudnn; i++)
        json_array_append_new(cudnn, json_pack("{s:o, s:o, s:b}", "dir", md_cli_json_bytes(m->cudnn[i].dir), "soname",
                                               md_cli_json_bytes(m->cudnn[i].soname),
                                               "unversioned_link", m->cudnn[i].unversioned_link));
    return json_pack("{s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "probed", d->probed, "gpus", gpus,
                     "driver", driver, "nvidia_smi", smi, "jetson", jetson, "toolkits", toolkits, "host_compiler", gxx,
                     "python", python, "binaries", bins, "cudnn", cudnn, "nccl", m->nccl_found);
}

static int print_json(const md_diagnosis *d)
{
    json_t *checks = json_array(), *findings = json_array(), *logs = json_array();
    for (size_t i = 0; i < d->n_checks; i++)
        json_array_append_new(checks, json_check(&d->checks[i]));
    for (size_t i = 0; i < d->n_findings; i++)
        json_array_append_new(findings, json_finding(d, &d->findings[i]));
    for (size_t i = 0; i < d->n_logs; i++)
        json_array_append_new(logs, json_log(&d->logs[i]));
    return md_cli_print_json(json_pack("{s:o, s:o, s:o, s:o}", "checks", checks, "findings", findings, "logs", logs,
                                       "machine", json_machine(d)));
}

/* ---- --list ---------------------------------------------------------------------------------- */

static int print_list(const md_diagnosis *d, bool json)
{
    if (json) {
        json_t *checks = json_array(), *findings = json_array();
        for (size_t i = 0; i < md_diagnose_n_checks; i++)
            json_array_append_new(checks, json_pack("{s:s, s:s}", "id", md_diagnose_checks[i].id, "name",
                                                    md_diagnose_checks[i].name));
        for (size_t i = 0; i < d->kb.count; i++)
            json_array_append_new(findings, json_pack("{s:s, s:s, s:s}", "id", d->kb.sigs[i].id, "severity",
                                                      d->kb.sigs[i].severity, "title", d->kb.sigs[i].title));
        return md_cli_print_json(json_pack("{s:o, s:o}", "checks", checks, "findings", findings));
    }
    printf("Checks:\n");
    for (size_t i = 0; i < md_diagnose_n_checks; i++)
        printf("  %-26s %s\n", md_diagnose_checks[i].id, md_diagnose_checks[i].name);
    printf("Findings:\n");
    for (size_t i = 0; i < d->kb.count; i++)
        printf("  %-26s %s\n", d->kb.sigs[i].id, d->kb.sigs[i].title);
    return MD_EXIT_OK;
}

/* ---- the command ----------------------------------------------------------------------------- */

static int read_logs(md_diagnosis *d, int argc, char **argv)
{
    int code = MD_EXIT_OK;
    for (int i = 0; i < argc; i++) {
        bool is_stdin = strcmp(argv[i], "-") == 0;
        FILE *in = is_stdin ? stdin : fopen(argv[i], "rb");
        if (!in) {
            md_cli_error("cannot open '%s': %s", argv[i], strerror(errno));
            code = MD_EXIT_INPUT;
            continue;
        }
        md_error err;
        md_error_clear(&err);
        md_status st = md_diagnose_log(d, in, is_stdin ? "-" : argv[i], &err);
        if (!is_stdin)
            fclose(in);
        if (st != MD_OK) {
            md_cli_report(&err);
            if (st != MD_ERR_IO)
                return md_cli_exit_for(st);
            code = MD_EXIT_INPUT;
        }
    }
    return code;
}

static const md_option md_cli_diagnose_options[] = {
    { 0, "LOG", NULL, MD_OPT_POSITIONAL | MD_OPT_REPEATABLE,
      "a build or run log to explain; '-' reads standard input" },
    { 'p', "python", "PATH", 0, "the Python whose torch and installed op to probe (default: python3)" },
    { 's', "search", "DIR", MD_OPT_REPEATABLE,
      "also look for MSDA binaries (MultiScaleDeformableAttention*.so, msda wheels, "
      "mmcv/detrex/GroundingDINO copies) under DIR" },
    { 'r', "root", "DIR", 0,
      "read /etc/nv_tegra_release, /proc and library folders under DIR (default: /, or $MSDA_ROOT)" },
    { 'n', "no-probe", NULL, 0, "read the logs only; probe nothing on this machine" },
    { 'f', "foreign", NULL, 0,
      "judge each log by what it says alone, as from another machine; list this machine's findings apart" },
    { 'l', "list", NULL, 0, "list every check and finding ID, and exit" },
    { 'j', "json", NULL, 0, "print JSON instead of text" },
    { 'v', "verbose", NULL, MD_OPT_SHORT, "show every detail of the checks" },
    MD_OPTION_HELP,
    MD_OPTION_END
};

static int cmd_diagnose(int argc, char **argv)
{
    md_getopt options;
    if (!md_getopt_init(&options, "diagnose", md_cli_diagnose_options))
        return MD_EXIT_INTERNAL;
    diagnose_options o = { .probe = { .probe = true } };
    o.probe.root = getenv("MSDA_ROOT");
    int c;
    while ((c = md_getopt_next(&options, argc, argv)) != -1) {
        switch (c) {
        case 'j': o.json = true; break;
        case 'v': o.verbose = true; break;
        case 'l': o.list = true; break;
        case 'n': o.probe.probe = false; break;
        case 'f': o.probe.foreign = true; break;
        case 'p': o.probe.python = optarg; break;
        case 'r': o.probe.root = optarg; break;
        case 's':
            if (o.probe.n_search_dirs == MAX_SEARCH)
                return md_cli_usage_error("diagnose", "too many --search options (at most %d)", MAX_SEARCH);
            o.search[o.probe.n_search_dirs++] = optarg;
            break;
        case 'h': md_cli_print_help(stdout, &md_cmd_diagnose); return MD_EXIT_OK;
        default: return md_cli_option_error("diagnose", argv, c);
        }
    }
    o.probe.search_dirs = o.search;
    if (o.probe.root && strcmp(o.probe.root, "/") == 0)
        o.probe.root = "";
    const char *no_color = getenv("NO_COLOR");
    o.utf8 = isatty(STDOUT_FILENO) && !(no_color && *no_color);
    o.colour = o.utf8;
    int stdin_count = 0;
    for (int i = optind; i < argc; i++)
        stdin_count += strcmp(argv[i], "-") == 0;
    if (stdin_count > 1)
        return md_cli_usage_error("diagnose", "standard input ('-') given more than once");
    if (argc - optind > MD_DIAG_MAX_LOGS)
        return md_cli_usage_error("diagnose", "too many logs (at most %d)", MD_DIAG_MAX_LOGS);

    md_diagnosis d;
    md_error err;
    md_error_clear(&err);
    if (md_diagnose_init(&d, &err) != MD_OK) {
        md_cli_report(&err);
        return md_cli_exit_for(err.code);
    }
    if (o.list) {
        int rc = print_list(&d, o.json);
        md_diagnose_free(&d);
        return rc;
    }
    md_diagnose_probe(&d, &o.probe);
    int code = read_logs(&d, argc - optind, argv + optind);
    if (code != MD_EXIT_OK && code != MD_EXIT_INPUT) {
        md_diagnose_free(&d);
        return code;
    }
    md_diagnose_finish(&d, &err);
    int printed = o.json ? print_json(&d) : (print_text(&d, &o), MD_EXIT_OK);
    bool problems = d.n_findings > 0;
    for (size_t i = 0; i < d.n_checks; i++)
        problems |= md_check_is_problem(d.checks[i].status);
    md_diagnose_free(&d);
    if (printed != MD_EXIT_OK)
        return printed;
    if (code == MD_EXIT_INPUT)
        return code;
    return problems ? MD_EXIT_PROBLEMS : MD_EXIT_OK;
}

const md_command md_cmd_diagnose = { "diagnose", cmd_diagnose,
    "Probe this machine, read failing logs, and name each cause and the command that fixes it",
    "diagnose [--json] [-v] [--list] [--no-probe] [--foreign] [--python PATH] [--search DIR]... [--root DIR] [LOG...|-]",
    md_cli_diagnose_options };
