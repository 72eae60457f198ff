/* msda-doctor build: plan per architecture, compile in parallel with a cache, one library per
 * CPU platform with the device code embedded. */
#include <getopt.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "build.h"
#include "cli.h"
#include "product.h"
#include "gpu_probe.h"

#define MAX_TOOLKIT_DIRS 8

typedef struct {
    const char *arch;
    const char *toolkit_dirs[MAX_TOOLKIT_DIRS];
    size_t n_toolkit_dirs;
    const char *platforms;
    const char *source;
    const char *out;
    const char *cache;
    unsigned jobs;
    bool dry_run, json;
} build_options;

static const char *atomic_name(md_atomic_strategy a)
{
    switch (a) {
    case MD_ATOMIC_NATIVE: return "native";
    case MD_ATOMIC_CAS: return "cas";
    case MD_ATOMIC_F32_BUFFER: return "f32-buffer";
    case MD_ATOMIC_MIXED: return "mixed";
    }
    return "f32-buffer";
}

static void target_name(const md_plan_target *t, char *buf, size_t size)
{
    snprintf(buf, size, "%s_%u", t->ptx ? "compute" : "sm", t->sm);
}

/* --platform: "x86_64,aarch64", or by default both when the cross compiler is there. */
static int parse_platforms(const char *spec, md_build_config *cfg)
{
    static char storage[MD_MAX_PLATFORMS][16];
    cfg->n_platforms = 0;
    if (!spec) {
        char cc[4096];
        snprintf(storage[0], sizeof storage[0], "%s", md_host_platform());
        cfg->platforms[cfg->n_platforms++] = storage[0];
        const char *other = strcmp(storage[0], "x86_64") == 0 ? "aarch64" : "x86_64";
        if (md_platform_compiler(other, cc, sizeof cc) == 0) {
            snprintf(storage[1], sizeof storage[1], "%s", other);
            cfg->platforms[cfg->n_platforms++] = storage[1];
        }
        return 0;
    }
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ",");
        char name[16];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        if (strcmp(name, "x86_64") != 0 && strcmp(name, "aarch64") != 0)
            return md_cli_usage_error("build", "unknown platform '%s' (x86_64 or aarch64)", name);
        bool seen = false;
        for (size_t i = 0; i < cfg->n_platforms; i++)
            seen |= strcmp(cfg->platforms[i], name) == 0;
        if (!seen) {
            if (cfg->n_platforms == MD_MAX_PLATFORMS)
                return md_cli_usage_error("build", "too many platforms");
            snprintf(storage[cfg->n_platforms], sizeof storage[0], "%s", name);
            cfg->platforms[cfg->n_platforms] = storage[cfg->n_platforms];
            cfg->n_platforms++;
        }
        p += len + (p[len] == ',');
    }
    return cfg->n_platforms ? 0 : md_cli_usage_error("build", "empty platform list");
}

static json_t *plan_json(const md_plan *plan)
{
    json_t *targets = json_array(), *toolkits = json_array(), *notes = json_array();
    for (size_t i = 0; i < plan->n_targets; i++) {
        const md_plan_target *t = &plan->targets[i];
        char name[32];
        target_name(t, name, sizeof name);
        json_array_append_new(targets, json_pack("{s:s, s:i, s:s, s:s, s:o, s:i, s:b, s:b, s:s, s:s}", "arch", name,
                                                 "sm", (int)t->sm, "kind", t->ptx ? "ptx" : "sass", "toolkit",
                                                 t->toolkit->version, "ccbin", t->ccbin[0] ? json_string(t->ccbin) : json_null(),
                                                 "max_threads", (int)t->max_threads, "f16", t->f16, "bf16", t->bf16,
                                                 "f16_atomic", atomic_name(t->f16_atomic), "bf16_atomic",
                                                 atomic_name(t->bf16_atomic)));
    }
    for (size_t i = 0; i < plan->n_toolkits; i++)
        json_array_append_new(toolkits, json_pack("{s:s, s:s, s:i}", "version", plan->toolkits[i].version, "nvcc",
                                                  plan->toolkits[i].nvcc, "max_gcc", (int)plan->toolkits[i].max_gcc));
    for (size_t i = 0; i < plan->n_notes; i++)
        json_array_append_new(notes, json_string(plan->notes[i]));
    return json_pack("{s:o, s:o, s:o}", "targets", targets, "toolkits", toolkits, "notes", notes);
}

static void print_plan(const md_plan *plan)
{
    printf("Plan: %zu target%s\n", plan->n_targets, plan->n_targets == 1 ? "" : "s");
    for (size_t i = 0; i < plan->n_targets; i++) {
        const md_plan_target *t = &plan->targets[i];
        char name[32];
        target_name(t, name, sizeof name);
        printf("  %-12s CUDA %-5s threads %-4u f16 %s (%s atomics)  bf16 %s (%s atomics)%s%s\n", name,
               t->toolkit->version, t->max_threads, t->f16 ? "on" : "off", atomic_name(t->f16_atomic),
               t->bf16 ? "on" : "off", atomic_name(t->bf16_atomic), t->ccbin[0] ? "  -ccbin " : "", t->ccbin);
    }
    for (size_t i = 0; i < plan->n_notes; i++)
        printf("  note: %s\n", plan->notes[i]);
}

static void print_command(char *const *argv)
{
    for (size_t i = 0; argv[i]; i++)
        printf("%s%s", i ? " " : "    ", argv[i]);
    putchar('\n');
}

const md_option md_cli_build_options[] = {
    { 'a', "arch", "SPEC", 0,
      "all (every architecture the toolkits target, plus PTX of the newest), native (the GPUs here), "
      "or a list: sm_61,8.6,orin; '+PTX' after an architecture adds its PTX (default: all)" },
    { 'p', "platform", "LIST", 0,
      "x86_64, aarch64 or both (default: this machine's, and the other when its cross compiler is installed)" },
    { 't', "toolkit", "DIR", MD_OPT_REPEATABLE, "a CUDA toolkit (DIR/bin/nvcc) to use beside those found" },
    { 'j', "jobs", "N", MD_OPT_SHORT, "compilations at a time (default: the number of cores)" },
    { 's', "source", "DIR", 0, "the project folder with kernels/ and wheels/ (default: .)" },
    { 'o', "out", "DIR", 0, "where the wheels go (default: wheels/dist)" },
    { 'c', "cache", "DIR", 0, "compiled objects by content (default: build/msda-cache)" },
    { 'n', "dry-run", NULL, 0, "print the plan and the exact commands, run nothing" },
    { 'J', "json", NULL, 0, "print JSON instead of text" },
    MD_OPTION_HELP,
    MD_OPTION_END
};

int cmd_build(int argc, char **argv)
{
    md_getopt options;
    if (!md_getopt_init(&options, "build", md_cli_build_options))
        return MD_EXIT_INTERNAL;
    build_options opt = { .arch = "all", .source = ".", .out = "wheels/dist", .cache = "build/msda-cache" };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    opt.jobs = cores > 0 ? (unsigned)cores : 1;
    int c;
    while ((c = md_getopt_next(&options, argc, argv)) != -1) {
        switch (c) {
        case 'a': opt.arch = optarg; break;
        case 'p': opt.platforms = optarg; break;
        case 't':
            if (opt.n_toolkit_dirs == MAX_TOOLKIT_DIRS)
                return md_cli_usage_error("build", "too many --toolkit options (at most %d)", MAX_TOOLKIT_DIRS);
            opt.toolkit_dirs[opt.n_toolkit_dirs++] = optarg;
            break;
        case 'j': {
            char *end;
            long n = strtol(optarg, &end, 10);
            if (*end || n < 1 || n > 256)
                return md_cli_usage_error("build", "-j needs a number from 1 to 256, not '%s'", optarg);
            opt.jobs = (unsigned)n;
            break;
        }
        case 's': opt.source = optarg; break;
        case 'o': opt.out = optarg; break;
        case 'c': opt.cache = optarg; break;
        case 'n': opt.dry_run = true; break;
        case 'J': opt.json = true; break;
        case 'h': md_cli_print_help(stdout, md_command_find("build")); return MD_EXIT_OK;
        default: return md_cli_option_error("build", argv, c);
        }
    }
    if (optind < argc)
        return md_cli_usage_error("build", "unexpected argument '%s'", argv[optind]);

    md_build_config cfg = { .jobs = opt.jobs, .dry_run = opt.dry_run, .out_dir = opt.out, .cache_dir = opt.cache,
                            .version = MD_VERSION };
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    if (epoch && *epoch) {
        char *end;
        long long v = strtoll(epoch, &end, 10);
        if (*end || v < 0)
            return md_cli_usage_error("build", "SOURCE_DATE_EPOCH must be a number of seconds, not '%s'", epoch);
        cfg.source_date_epoch = (time_t)v;
    }
    /* libarchive writes zip dates in local time: UTC makes the wheel the same everywhere. */
    setenv("TZ", "UTC", 1);
    tzset();
    int rc = parse_platforms(opt.platforms, &cfg);
    if (rc != 0)
        return rc;
    char kernels_dir[4096], package_dir[4096], work_dir[4096];
    snprintf(kernels_dir, sizeof kernels_dir, "%s/kernels", opt.source);
    snprintf(package_dir, sizeof package_dir, "%s/wheels", opt.source);
    snprintf(work_dir, sizeof work_dir, "%s/build/msda", opt.source);
    cfg.kernels_dir = kernels_dir;
    cfg.package_dir = package_dir;
    cfg.work_dir = work_dir;

    md_error err;
    md_error_clear(&err);
    md_toolkit *toolkits = NULL;
    size_t n_toolkits = 0;
    md_host_compiler *compilers = NULL;
    size_t n_compilers = 0;
    md_plan plan = { 0 };
    md_build_result result = { 0 };
    md_gpu_probe probe = { 0 };
    unsigned native[16];
    size_t n_native = 0;
    md_status st = md_toolkits_find(opt.toolkit_dirs, opt.n_toolkit_dirs, &toolkits, &n_toolkits, &err);
    if (st == MD_OK)
        st = md_host_compilers_find(&compilers, &n_compilers, &err);
    if (st == MD_OK && strcmp(opt.arch, "native") == 0) {
        md_error probe_err;
        if (md_gpu_probe_run(&probe, &probe_err) == MD_OK)
            for (size_t i = 0; i < probe.n_gpus && n_native < 16; i++)
                native[n_native++] = probe.gpus[i].sm;
        else
            st = md_fail(&err, MD_ERR_UNSUPPORTED, "--arch native: %s", probe_err.message);
    }
    if (st == MD_OK)
        st = md_plan_make(opt.arch, native, n_native, toolkits, n_toolkits, compilers, n_compilers, &plan, &err);
    if (st == MD_OK) {
        cfg.plan = &plan;
        if (!opt.json)
            print_plan(&plan);
        fflush(stdout);
        st = md_build_run(&cfg, &result, &err);
    }
    if (st == MD_ERR_ARGUMENT) {
        rc = md_cli_usage_error("build", "%s", err.message);
    } else if (opt.json && (st == MD_OK || plan.n_targets)) {
        json_t *steps = json_array(), *outputs = json_array();
        for (size_t i = 0; i < result.n_steps; i++) {
            json_t *args = json_array();
            for (size_t a = 0; result.steps[i].argv[a]; a++)
                json_array_append_new(args, json_string(result.steps[i].argv[a]));
            json_array_append_new(steps, json_pack("{s:s, s:o, s:s, s:b}", "what", result.steps[i].what, "command", args,
                                                   "output", result.steps[i].output, "cached", result.steps[i].cached));
        }
        for (size_t i = 0; i < result.n_outputs && !opt.dry_run && st == MD_OK; i++)
            json_array_append_new(outputs, json_pack("{s:s, s:s, s:s, s:s}", "platform", result.outputs[i].platform,
                                                     "library", result.outputs[i].library, "platform_tag",
                                                     result.outputs[i].platform_tag, "wheel", result.outputs[i].wheel));
        rc = md_cli_print_json(json_pack("{s:b, s:o, s:o, s:o, s:i, s:i, s:o}", "dry_run", opt.dry_run, "plan",
                                         plan_json(&plan), "steps", steps, "outputs", outputs, "compiled",
                                         (int)result.n_compiled, "cached", (int)result.n_cached, "error",
                                         st == MD_OK ? json_null() : json_string(err.message)));
        if (st != MD_OK) {
            md_cli_error("%s", err.message);
            rc = md_cli_exit_for(st);
        }
    } else if (st != MD_OK) {
        md_cli_error("%s", err.message);
        rc = md_cli_exit_for(st);
    } else if (opt.dry_run) {
        printf("Commands:\n");
        for (size_t i = 0; i < result.n_steps; i++)
            print_command(result.steps[i].argv);
    } else {
        printf("Compiled %zu, reused %zu from the cache (%s); linked and packed %zu platform%s\n", result.n_compiled,
               result.n_cached, opt.cache, result.n_outputs, result.n_outputs == 1 ? "" : "s");
        for (size_t i = 0; i < result.n_outputs; i++)
            printf("%s: %s\n", result.outputs[i].platform, result.outputs[i].wheel);
    }
    md_build_result_free(&result);
    md_plan_free(&plan);
    md_gpu_probe_free(&probe);
    free(toolkits);
    free(compilers);
    return rc;
}
