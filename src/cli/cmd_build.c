/* msda-doctor build: plan per architecture, compile in parallel with a cache, one library per
 * CPU platform with the device code embedded. */
#include <getopt.h>
#include <signal.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "build/build.h"
#include "cli.h"
#include "recipes/product.h"

#define MAX_DEFINES 16

typedef struct {
    md_build_request req;
    const char *defines[MAX_DEFINES + 1];
    size_t n_defines;
    bool json;
    bool quiet;
} build_options;

static void target_name(const md_plan_target *t, char *buf, size_t size)
{
    snprintf(buf, size, "%s_%u", t->ptx ? "compute" : "sm", t->sm);
}

static json_t *plan_json(const md_plan *plan)
{
    json_t *targets = json_array(), *toolkits = json_array(), *notes = json_array();
    for (size_t i = 0; i < plan->n_targets; i++) {
        const md_plan_target *t = &plan->targets[i];
        char name[32];
        target_name(t, name, sizeof name);
        json_t *defines = json_object();
        for (size_t d = 0; d < t->n_defines; d++)
            json_object_set_new(defines, t->defines[d].name, json_integer(t->defines[d].value));
        json_array_append_new(
            targets,
            json_pack("{s:s, s:i, s:s, s:b, s:s, s:o, s:i, s:b, s:b, s:s, s:s, s:o, s:o, s:b, s:s, s:s}", "arch", name,
                      "sm", (int)t->sm,
                      "kind", t->ptx ? "ptx" : "sass", "known", t->known, "toolkit", t->toolkit->version, "ccbin",
                      t->ccbin[0] ? json_string(t->ccbin) : json_null(), "max_threads",
                      (int)md_plan_define(t, MD_KNOB_MAX_THREADS, 0), "f16", md_plan_define(t, MD_KNOB_ENABLE_F16, 0) != 0,
                      "bf16", md_plan_define(t, MD_KNOB_ENABLE_BF16, 0) != 0, "f16_atomic",
                      md_atomic_name(md_plan_define(t, MD_KNOB_F16_ATOMIC, 0)), "bf16_atomic",
                      md_atomic_name(md_plan_define(t, MD_KNOB_BF16_ATOMIC, 0)), "defines", defines, "ptx_isa",
                      t->ptx_isa ? json_sprintf("%u.%u", t->ptx_isa / 10, t->ptx_isa % 10) : json_null(), "lowered",
                      t->lowered, "needs_cuda", t->needs_cuda_text, "needs_driver", t->needs_driver));
    }
    for (size_t i = 0; i < plan->n_toolkits; i++)
        json_array_append_new(toolkits, json_pack("{s:s, s:s, s:i}", "version", plan->toolkits[i].version, "nvcc",
                                                  plan->toolkits[i].nvcc, "max_gcc", (int)plan->toolkits[i].max_gcc));
    for (size_t i = 0; i < plan->n_notes; i++)
        json_array_append_new(notes, json_string(plan->notes[i]));
    json_t *fetch = json_array();
    for (size_t i = 0; i < plan->n_fetch; i++) {
        json_t *archs = json_array();
        for (size_t k = 0; k < plan->fetch[i].n_sms; k++)
            json_array_append_new(archs, json_sprintf("sm_%u", plan->fetch[i].sms[k]));
        json_array_append_new(fetch, json_pack("{s:s, s:o}", "cuda", plan->fetch[i].release, "archs", archs));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "targets", targets, "toolkits", toolkits, "notes", notes, "fetch", fetch);
}

/* The images that serve T's architecture: its SASS, and PTX written for it (old drivers'), as
 * "CUDA 11.8 SASS from driver 450.80.02 (CUDA 11.0); PTX ISA 6.5 from ...". */
static void images_of(const md_plan *plan, const md_plan_target *t, char *line, size_t size)
{
    line[0] = '\0';
    for (size_t k = 0; k < plan->n_targets; k++) {
        const md_plan_target *u = &plan->targets[k];
        if (u->sm != t->sm || (u->ptx && !u->lowered))
            continue;
        size_t len = strlen(line);
        if (u->ptx)
            snprintf(line + len, size - len, "%sPTX ISA %u.%u from driver %s (CUDA %s)", len ? "; " : "",
                     u->ptx_isa / 10, u->ptx_isa % 10, u->needs_driver, u->needs_cuda_text);
        else
            snprintf(line + len, size - len, "%sCUDA %s SASS from driver %s (CUDA %s)", len ? "; " : "",
                     u->toolkit->version, u->needs_driver, u->needs_cuda_text);
    }
}

/* The oldest driver each SASS architecture runs on: a line per run of architectures whose images
 * need the same drivers. */
static void print_driver_floors(const md_plan *plan)
{
    printf("Drivers: each architecture runs on\n");
    char line[256] = "", run_line[256] = "", first[32] = "", last[32] = "";
    for (size_t i = 0; i <= plan->n_targets; i++) {
        const md_plan_target *t = i < plan->n_targets ? &plan->targets[i] : NULL;
        if (t && (t->ptx || (i > 0 && plan->targets[i - 1].sm == t->sm && !plan->targets[i - 1].ptx)))
            continue; /* PTX, or an architecture its first target already described */
        if (t)
            images_of(plan, t, line, sizeof line);
        if (first[0] && (!t || strcmp(line, run_line) != 0)) {
            char archs[72];
            snprintf(archs, sizeof archs, strcmp(first, last) ? "%s-%s" : "%s", first, last);
            printf("  %-16s %s\n", archs, run_line);
            first[0] = '\0';
        }
        if (!t)
            break;
        target_name(t, last, sizeof last);
        if (!first[0]) {
            snprintf(first, sizeof first, "%s", last);
            snprintf(run_line, sizeof run_line, "%s", line);
        }
    }
}

static void print_plan(const md_build_job *job)
{
    const md_plan *plan = &job->plan;
    if (job->embedded_source)
        printf("Sources: built into msda-doctor %s, unpacked in %s\n", MD_VERSION, job->source_dir);
    else
        printf("Sources: %s\n", job->source_dir);
    printf("Plan: %zu target%s\n", plan->n_targets, plan->n_targets == 1 ? "" : "s");
    for (size_t i = 0; i < plan->n_targets; i++) {
        const md_plan_target *t = &plan->targets[i];
        char name[32], needs[64];
        target_name(t, name, sizeof name);
        if (t->lowered)
            snprintf(needs, sizeof needs, "ISA %u.%u, driver >= %s", t->ptx_isa / 10, t->ptx_isa % 10, t->needs_driver);
        else
            snprintf(needs, sizeof needs, "driver >= %s", t->needs_driver);
        printf("  %-12s CUDA %-5s %-28s threads %-4ld f16 %s (%s atomics)  bf16 %s (%s atomics)%s%s\n", name,
               t->toolkit->version, needs, md_plan_define(t, MD_KNOB_MAX_THREADS, 0),
               md_plan_define(t, MD_KNOB_ENABLE_F16, 0) ? "on" : "off",
               md_atomic_name(md_plan_define(t, MD_KNOB_F16_ATOMIC, 0)),
               md_plan_define(t, MD_KNOB_ENABLE_BF16, 0) ? "on" : "off",
               md_atomic_name(md_plan_define(t, MD_KNOB_BF16_ATOMIC, 0)), t->ccbin[0] ? "  -ccbin " : "", t->ccbin);
    }
    for (size_t i = 0; i < plan->n_notes; i++)
        printf("  note: %s\n", plan->notes[i]);
    print_driver_floors(plan);
}

static void print_command(char *const *argv)
{
    for (size_t i = 0; argv[i]; i++)
        printf("%s%s", i ? " " : "    ", argv[i]);
    putchar('\n');
}

static const md_option md_cli_build_options[] = {
    { 'a', "arch", "SPEC", 0,
      "all (every architecture the toolkits target, plus PTX of the newest and of the newest toolkit's "
      "oldest), native (the GPUs here), "
      "or a list: sm_61,8.6,orin; '+PTX' after an architecture adds its PTX (default: " MD_BUILD_DEFAULT_ARCH ")" },
    { 'p', "platform", "LIST", 0,
      "x86_64, aarch64 or both (default: this machine's, and the other when its cross compiler is installed)" },
    { 't', "toolkit", "DIR", MD_OPT_REPEATABLE, "a CUDA toolkit (DIR/bin/nvcc) to use beside those found" },
    { 'D', "define", "NAME=VALUE", MD_OPT_REPEATABLE,
      "set a device-code macro for every target: a knob of kernels/libmsda.json, or another" },
    { 'j', "jobs", "N", MD_OPT_SHORT, "compilations at a time (default: the cores this process may run on)" },
    { 's', "source", "DIR", 0, "build from the project folder DIR, with kernels/ and wheels/ (default: the sources built into msda-doctor)" },
    { 'o', "out", "DIR", 0, "where the wheels go (default: " MD_BUILD_DEFAULT_OUT ")" },
    { 'c', "cache", "DIR", 0, "compiled objects by content (default: " MD_BUILD_DEFAULT_CACHE ")" },
    { 'F', "fetch", NULL, 0,
      "first fetch (as msda-doctor fetch --cuda RELEASE) the toolkits for the architectures that none here "
      "targets, then build with them" },
    { 'n', "dry-run", NULL, 0, "print the plan and the exact commands, run nothing (--fetch still fetches)" },
    { 'J', "json", NULL, 0, "print JSON instead of text" },
    { 'q', "quiet", NULL, 0, "no progress on stderr (by default a live line on a terminal, else a line per step)" },
    { 'W', "no-wait", NULL, 0, "fail at once when another build of the same folder is running, rather than wait" },
    MD_OPTION_HELP,
    MD_OPTION_END
};

/* Before each fetch of --fetch: what is fetched and why, after any progress line. */
static void on_fetch(void *ctx, const char *release, size_t n_archs)
{
    md_cli_progress_end(ctx);
    fprintf(stderr, MD_PROGRAM ": fetching CUDA %s for %zu architecture%s that no toolkit here targets\n", release,
            n_archs, n_archs == 1 ? "" : "s");
}

/* Before waiting on another build of the same folder: a build can take minutes, and a silent
 * wait looks like a hang. */
static void on_wait(void *ctx, const char *lock_path, long holder)
{
    md_cli_progress_end(ctx);
    if (holder > 0)
        fprintf(stderr, MD_PROGRAM ": another build of this folder is running (process %ld holds '%s'); waiting for "
                "it to end\n", holder, lock_path);
    else
        fprintf(stderr, MD_PROGRAM ": another build of this folder is running (it holds '%s'); waiting for it to end\n",
                lock_path);
}

/* SIGINT, SIGTERM or SIGHUP: the build stops its compilers, cleans up, and the signal is raised
 * again once it has (so the exit status is the signal's, as a shell expects). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
    stop_signal = sig;
}

static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof stop_signals / sizeof *stop_signals; i++) {
        /* One ignored (nohup's SIGHUP, a background job's SIGINT) stays ignored. */
        struct sigaction old;
        if (sigaction(stop_signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(stop_signals[i], &sa, NULL);
    }
}

/* Progress of the steps on stderr: on a terminal one line rewritten in place (steps done of
 * all, elapsed, an estimate of what is left, what runs); elsewhere one line per finished step,
 * so that a CI log shows the build moving. */
typedef struct {
    bool shown;               /* not with --quiet, --json or --dry-run */
    bool terminal;
    bool line_shown;
} step_progress;

/* The callbacks' context: the download line first, as md_cli_progress_update takes it. */
typedef struct {
    md_cli_progress fetch;
    step_progress steps;
} build_progress;

static void on_step(void *ctx, const md_step_event *ev)
{
    step_progress *p = &((build_progress *)ctx)->steps;
    if (!p->shown)
        return;
    if (!p->terminal) {
        if (ev->kind == MD_STEP_FINISHED)
            fprintf(stderr, "[%zu/%zu] %s %.1f s%s\n", ev->done, ev->total, ev->what, ev->seconds,
                    ev->ok ? "" : " (failed)");
        return;
    }
    char left[32] = "";
    if (ev->done > 0 && ev->done < ev->total)
        snprintf(left, sizeof left, ", about %.0f s left", ev->elapsed / (double)ev->done * (double)(ev->total - ev->done));
    char running[160] = "";
    for (size_t i = 0; i < 3 && ev->running[i]; i++)
        snprintf(running + strlen(running), sizeof running - strlen(running), "%s%s", i ? ", " : "", ev->running[i]);
    fprintf(stderr, "\r\033[K[%zu/%zu] %.0f s%s  %s", ev->done, ev->total, ev->elapsed, left, running);
    p->line_shown = true;
}

static void end_step_progress(step_progress *p)
{
    if (p->terminal && p->line_shown)
        fputs("\r\033[K", stderr);
    p->line_shown = false;
}

static int cmd_build(int argc, char **argv)
{
    md_getopt options;
    if (!md_getopt_init(&options, "build", md_cli_build_options))
        return MD_EXIT_INTERNAL;
    build_options opt = { .req = md_build_request_defaults() };
    int c;
    while ((c = md_getopt_next(&options, argc, argv)) != -1) {
        switch (c) {
        case 'a': opt.req.arch = optarg; break;
        case 'p': opt.req.platforms = optarg; break;
        case 't':
            if (opt.req.n_toolkit_dirs == MD_MAX_TOOLKIT_DIRS)
                return md_cli_usage_error("build", "too many --toolkit options (at most %d)", MD_MAX_TOOLKIT_DIRS);
            opt.req.toolkit_dirs[opt.req.n_toolkit_dirs++] = optarg;
            break;
        case 'D':
            if (opt.n_defines == MAX_DEFINES)
                return md_cli_usage_error("build", "too many --define options (at most %d)", MAX_DEFINES);
            opt.defines[opt.n_defines++] = optarg;
            break;
        case 'j': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 256)
                return md_cli_usage_error("build", "-j needs a number from 1 to 256, not '%s'", optarg);
            opt.req.jobs = (unsigned)n;
            break;
        }
        case 's': opt.req.source_dir = optarg; break;
        case 'o': opt.req.out_dir = optarg; break;
        case 'c': opt.req.cache_dir = optarg; break;
        case 'F': opt.req.fetch = true; break;
        case 'n': opt.req.dry_run = true; break;
        case 'J': opt.json = true; break;
        case 'q': opt.quiet = true; break;
        case 'W': opt.req.no_wait = true; break;
        case 'h': md_cli_print_help(stdout, &md_cmd_build); return MD_EXIT_OK;
        default: return md_cli_option_error("build", argv, c);
        }
    }
    if (optind < argc)
        return md_cli_usage_error("build", "unexpected argument '%s'", argv[optind]);
    opt.req.defines = opt.defines;
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    if (epoch && *epoch) {
        char *end;
        long long v = strtoll(epoch, &end, 10);
        if (*end || v < 0)
            return md_cli_usage_error("build", "SOURCE_DATE_EPOCH must be a number of seconds, not '%s'", epoch);
        opt.req.source_date_epoch = (time_t)v;
    }
    const char *timeout = getenv("MSDA_BUILD_STEP_TIMEOUT");
    if (timeout && *timeout) {
        char *end;
        long v = strtol(timeout, &end, 10);
        if (*end || v < 0 || v > 86400)
            return md_cli_usage_error("build", "MSDA_BUILD_STEP_TIMEOUT must be a number of seconds from 0 "
                                      "(no limit) to 86400, not '%s'", timeout);
        opt.req.step_timeout_s = (unsigned)v;
    }

    int rc = MD_EXIT_OK;
    md_error err;
    char text[sizeof err.message + 64];
    md_error_clear(&err);
    md_build_job *job = calloc(1, sizeof *job);
    md_build_result result = { 0 };
    if (!job) {
        md_cli_error("out of memory");
        return MD_EXIT_INTERNAL;
    }
    build_progress progress = { .fetch = { .what = "" },
                                .steps = { .shown = !opt.quiet && !opt.json && !opt.req.dry_run,
                                           .terminal = md_cli_progress_wanted() } };
    opt.req.on_fetch = on_fetch;
    opt.req.on_wait = on_wait;
    opt.req.on_step = on_step;
    opt.req.stop = &stop_signal;
    opt.req.ctx = &progress;
    catch_stop_signals();
    if (md_cli_progress_wanted())
        opt.req.fetch_progress = md_cli_progress_update;
    md_status st = md_build_prepare(&opt.req, job, &err);
    md_cli_progress_end(&progress.fetch);
    if (st == MD_OK) {
        if (!opt.json)
            print_plan(job);
        fflush(stdout);
        st = md_build_run(&job->cfg, &result, &err);
        end_step_progress(&progress.steps);
    }
    const md_plan *plan = &job->plan;
    if (st == MD_ERR_ARGUMENT) {
        rc = md_cli_usage_error("build", "%s", md_cli_error_text(&err, text, sizeof text));
    } else if (opt.json && (st == MD_OK || plan->n_targets)) {
        json_t *steps = json_array(), *outputs = json_array();
        for (size_t i = 0; i < result.n_steps; i++) {
            json_t *args = json_array();
            for (size_t a = 0; result.steps[i].argv[a]; a++)
                json_array_append_new(args, json_string(result.steps[i].argv[a]));
            json_array_append_new(steps, json_pack("{s:s, s:o, s:s, s:b}", "what", result.steps[i].what, "command", args,
                                                   "output", result.steps[i].output, "cached", result.steps[i].cached));
        }
        for (size_t i = 0; i < result.n_outputs && !opt.req.dry_run && st == MD_OK; i++)
            json_array_append_new(outputs, json_pack("{s:s, s:s, s:s, s:s}", "platform", result.outputs[i].platform,
                                                     "library", result.outputs[i].library, "platform_tag",
                                                     result.outputs[i].platform_tag, "wheel", result.outputs[i].wheel));
        rc = md_cli_print_json(json_pack("{s:b, s:b, s:{s:s, s:b}, s:o, s:i, s:o, s:o, s:i, s:i, s:o}", "dry_run",
                                         opt.req.dry_run, "up_to_date", result.up_to_date,
                                         "source", "dir", job->source_dir, "embedded", job->embedded_source, "plan",
                                         plan_json(plan), "jobs", (int)job->cfg.jobs, "steps", steps, "outputs",
                                         outputs, "compiled",
                                         (int)result.counts.n_compiled, "cached", (int)result.counts.n_cached, "error",
                                         st == MD_OK ? json_null()
                                                     : json_string(md_cli_error_text(&err, text, sizeof text))));
        if (st != MD_OK) {
            md_cli_report(&err);
            rc = md_cli_exit_for(st);
        }
    } else if (st != MD_OK) {
        md_cli_report(&err);
        rc = md_cli_exit_for(st);
    } else if (opt.req.dry_run) {
        printf("Commands:\n");
        for (size_t i = 0; i < result.n_steps; i++)
            print_command(result.steps[i].argv);
    } else {
        if (result.up_to_date)
            printf("Compiled 0, reused %zu from the cache (%s); nothing changed since the last build: its "
                   "wheel%s kept\n", result.counts.n_cached, opt.req.cache_dir, result.n_outputs == 1 ? "" : "s");
        else
            printf("Compiled %zu, reused %zu from the cache (%s); linked and packed %zu platform%s\n",
                   result.counts.n_compiled, result.counts.n_cached, opt.req.cache_dir, result.n_outputs,
                   result.n_outputs == 1 ? "" : "s");
        for (size_t i = 0; i < result.n_outputs; i++)
            printf("%s: %s\n", result.outputs[i].platform, result.outputs[i].wheel);
    }
    md_build_result_free(&result);
    md_build_job_free(job);
    free(job);
    if (st == MD_ERR_STOPPED && stop_signal) {
        /* Everything is cleaned up: die of the signal, as the caller's shell expects. */
        fflush(NULL);
        signal(stop_signal, SIG_DFL);
        raise(stop_signal);
        rc = 128 + stop_signal;
    }
    return rc;
}

const md_command md_cmd_build = { "build", cmd_build,
    "Compile the MSDA kernels for every architecture and package them per CPU platform",
    "build [--json] [--dry-run] [--fetch] [--quiet] [--no-wait] [--arch SPEC] [--platform LIST] [--toolkit DIR]... [--define NAME=VALUE]... [-j N] [--source DIR] [--out DIR] [--cache DIR]",
    md_cli_build_options };
