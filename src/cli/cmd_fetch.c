/* msda-doctor fetch: a CUDA toolkit from NVIDIA's redistributable archives, for the
 * architectures (sm_50 to sm_72) that the newest nvcc no longer targets, or from NVIDIA's
 * compiler wheels on a package index; and the list of fetched toolkits. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "fetch/fetch.h"
#include "fetch/fetch_cache.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

static const md_option md_cli_fetch_options[] = {
    { 'c', "cuda", "VERSION", 0,
      "the CUDA release to fetch, as NVIDIA names it: 11.8.0 (with --wheels: MAJOR.MINOR, 13.0)" },
    { 'p', "platform", "PLATFORM", 0,
      "linux-x86_64, linux-sbsa or linux-aarch64 (default: this machine's); with --list or --remove, only "
      "that platform's toolkits" },
    { 'm', "mirror", "URL", 0, "where redistrib_VERSION.json and the archives are (default: $" MD_FETCH_MIRROR_ENV
      " or NVIDIA's)" },
    { 'd', "dest", "DIR", 0,
      "put the toolkit in DIR/cuda/MAJOR.MINOR/PLATFORM (default: ~/.cache/msda-doctor)" },
    { 'H', "allow-http", NULL, 0, "allow plain http:// to hosts other than loopback" },
    { 'r', "retries", "N", 0, "attempts after a transient failure, each waiting twice as long (default: " STRINGIFY(MD_FETCH_DEFAULT_RETRIES) ")" },
    { 't', "timeout", "SECONDS", 0, "give up a connection or a stalled transfer after this long (default: " STRINGIFY(MD_FETCH_DEFAULT_TIMEOUT_S) ")" },
    { 'w', "wheels", NULL, 0,
      "take NVIDIA's compiler wheels from a package index instead of the redist archives (CUDA 13 and "
      "newer)" },
    { 'i', "index-url", "URL", 0,
      "the package index for --wheels, and implies it (default: $PIP_INDEX_URL, pip's configuration, else "
      "PyPI)" },
    { 'l', "list", NULL, 0, "list the toolkits fetched into the cache (or --dest) and exit" },
    { 'R', "remove", "VERSION", 0,
      "remove the fetched toolkits MAJOR.MINOR, of every platform or of --platform, from the cache (or --dest) "
      "and exit" },
    { 'j', "json", NULL, 0, "print JSON instead of text" },
    MD_OPTION_HELP,
    MD_OPTION_END
};

static bool parse_count(const char *s, long max, long *out)
{
    char *end = NULL;
    long n = strtol(s, &end, 10);
    if (!*s || *end || n < 0 || n > max)
        return false;
    *out = n;
    return true;
}

static json_t *result_json(const md_fetch_result *r)
{
    json_t *comps = json_array();
    for (size_t i = 0; i < r->n_components; i++) {
        const md_fetch_component *c = &r->components[i];
        json_array_append_new(comps, json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:b, s:I}", "name", c->name, "version",
                                               c->version, "url", c->url, "file", c->file, "sha256", c->sha256, "size",
                                               (json_int_t)c->size, "downloaded", c->downloaded, "resumed_from",
                                               (json_int_t)c->resumed_from));
    }
    return json_pack("{s:s, s:s, s:o, s:s, s:o, s:o, s:s, s:b, s:o}", "version", r->version, "source",
                     r->index_url[0] ? "wheels" : "redist", "release_label",
                     r->release_label[0] ? json_string(r->release_label) : json_null(), "platform", r->platform,
                     "manifest", r->manifest_url[0] ? json_string(r->manifest_url) : json_null(), "index",
                     r->index_url[0] ? json_string(r->index_url) : json_null(), "toolkit", r->toolkit_dir,
                     "already_present", r->already_present, "components", comps);
}

static void print_result(const md_fetch_result *r)
{
    if (r->already_present) {
        printf("CUDA %s is already in %s (remove that folder to fetch it again)\n", r->version, r->toolkit_dir);
    } else {
        bool label = r->release_label[0] && strcmp(r->release_label, r->version) != 0;
        printf("Fetched CUDA %s%s%s%s for %s into %s\n", r->version, label ? " (" : "", label ? r->release_label : "",
               label ? ")" : "", r->platform, r->toolkit_dir);
        if (r->index_url[0])
            printf("  from the wheels on %s\n", r->index_url);
        int width = 12;
        for (size_t i = 0; i < r->n_components; i++)
            if ((int)strlen(r->components[i].name) > width)
                width = (int)strlen(r->components[i].name);
        for (size_t i = 0; i < r->n_components; i++) {
            const md_fetch_component *c = &r->components[i];
            printf("  %-*s %-12s %s", width, c->name, c->version[0] ? c->version : "-",
                   c->downloaded ? "downloaded" : "from an earlier run");
            if (c->resumed_from)
                printf(" (resumed at byte %" PRIu64 ")", c->resumed_from);
            printf(", sha256 ok\n");
        }
    }
    printf("Build with it: msda-doctor build --toolkit %s\n", r->toolkit_dir);
}

static int list_cache(const char *dir, const char *platform, bool json)
{
    md_cached_toolkit *list;
    size_t n;
    md_error err;
    md_status st = md_fetch_cache_list(dir, platform, NULL, &list, &n, &err);
    if (st != MD_OK) {
        md_cli_report(&err);
        return md_cli_exit_for(st);
    }
    int rc = MD_EXIT_OK;
    json_t *items = json ? json_array() : NULL;
    for (size_t i = 0; i < n; i++) {
        const md_cached_toolkit *t = &list[i];
        if (json)
            json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:b, s:b}", "version", t->version, "platform",
                                                   t->platform, "path", t->path, "nvcc", t->has_nvcc, "runs_here",
                                                   t->host_rank >= 0));
        else
            printf("CUDA %-6s %-14s %s%s%s\n", t->version, t->platform, t->path, t->has_nvcc ? "" : "  (no bin/nvcc)",
                   t->host_rank >= 0 ? "" : "  (does not run on this machine)");
    }
    if (json)
        rc = md_cli_print_json(json_pack("{s:s, s:o}", "dir", dir, "toolkits", items));
    else if (n == 0)
        printf("No fetched toolkit%s%s in %s\n", platform ? " for " : "", platform ? platform : "", dir);
    free(list);
    return rc;
}

static int remove_from_cache(const char *dir, const char *version, const char *platform, bool json)
{
    md_cached_toolkit *removed;
    size_t n;
    md_error err;
    md_status st = md_fetch_cache_remove(dir, version, platform, &removed, &n, &err);
    if (st != MD_OK) {
        md_cli_report(&err);
        return md_cli_exit_for(st);
    }
    int rc = MD_EXIT_OK;
    json_t *items = json ? json_array() : NULL;
    for (size_t i = 0; i < n; i++) {
        if (json)
            json_array_append_new(items, json_pack("{s:s, s:s, s:s}", "version", removed[i].version, "platform",
                                                   removed[i].platform, "path", removed[i].path));
        else
            printf("Removed CUDA %s for %s: %s\n", removed[i].version, removed[i].platform, removed[i].path);
    }
    if (json)
        rc = md_cli_print_json(json_pack("{s:o}", "removed", items));
    free(removed);
    return rc;
}

static md_status run_fetch(md_fetch_request *req, md_fetch_result *result, md_error *err)
{
    md_cli_progress progress = { .what = "" };
    if (md_cli_progress_wanted()) {
        req->http.progress = md_cli_progress_update;
        req->http.progress_ctx = &progress;
    }
    md_status st = md_fetch_toolkit(req, result, err);
    md_cli_progress_end(&progress);
    req->http.progress = NULL;
    return st;
}

static int cmd_fetch(int argc, char **argv)
{
    md_getopt options;
    if (!md_getopt_init(&options, "fetch", md_cli_fetch_options))
        return MD_EXIT_INTERNAL;
    md_fetch_request req = md_fetch_request_defaults();
    bool json = false, list = false, mirror_given = false;
    const char *remove = NULL;
    long n;
    int c;
    while ((c = md_getopt_next(&options, argc, argv)) != -1) {
        switch (c) {
        case 'c': req.version = optarg; break;
        case 'p': req.platform = optarg; break;
        case 'm': req.mirror = optarg; mirror_given = true; break;
        case 'd': req.dest = optarg; break;
        case 'H': req.http.allow_http = true; break;
        case 'r':
            if (!parse_count(optarg, 20, &n))
                return md_cli_usage_error("fetch", "--retries needs a count from 0 to 20, not '%s'", optarg);
            req.http.retries = (unsigned)n;
            break;
        case 't':
            if (!parse_count(optarg, 3600, &n) || n == 0)
                return md_cli_usage_error("fetch", "--timeout needs seconds from 1 to 3600, not '%s'", optarg);
            req.http.connect_timeout_s = req.http.stall_timeout_s = n;
            break;
        case 'w': req.wheels = true; break;
        case 'i': req.wheels = true; req.index_url = optarg; break;
        case 'l': list = true; break;
        case 'R': remove = optarg; break;
        case 'j': json = true; break;
        case 'h': md_cli_print_help(stdout, &md_cmd_fetch); return MD_EXIT_OK;
        default: return md_cli_option_error("fetch", argv, c);
        }
    }
    if (optind < argc)
        return md_cli_usage_error("fetch", "unexpected argument '%s'", argv[optind]);
    if ((list || remove) && (req.version || list == (remove != NULL)))
        return md_cli_usage_error("fetch", "--list, --remove and --cuda exclude each other");
    if (!req.version && !list && !remove)
        return md_cli_usage_error("fetch", "no --cuda VERSION given");
    if (req.wheels && mirror_given)
        return md_cli_usage_error("fetch", "--mirror is where the redist archives are; give the wheels' index with "
                                  "--index-url");
    char dest[4096];
    if (!req.dest) {
        if (!md_fetch_cache_dir(dest, sizeof dest))
            return md_cli_usage_error("fetch", "no --dest given, and neither XDG_CACHE_HOME nor HOME is set");
        req.dest = dest;
    }
    if (list)
        return list_cache(req.dest, req.platform, json);
    if (remove)
        return remove_from_cache(req.dest, remove, req.platform, json);
    char index[2048], index_source[4096];
    if (req.wheels && !req.index_url && md_fetch_pip_index(index, sizeof index, index_source, sizeof index_source)) {
        req.index_url = index;
        if (!json)
            fprintf(stderr, "msda-doctor: the package index %s comes from %s\n", index, index_source);
    }
    md_fetch_result result;
    md_error err;
    md_status st = run_fetch(&req, &result, &err);
    if (st != MD_OK) {
        md_cli_report(&err);
        return md_cli_exit_for(st);
    }
    if (json)
        return md_cli_print_json(result_json(&result));
    print_result(&result);
    return MD_EXIT_OK;
}

const md_command md_cmd_fetch = { "fetch", cmd_fetch,
    "Download a CUDA toolkit from NVIDIA's redist archives or compiler wheels, checksummed; list or remove one",
    "fetch [--json] [--cuda VERSION] [--wheels] [--index-url URL] [--platform PLATFORM] [--mirror URL] [--dest DIR] [--allow-http] [--retries N] [--timeout SECONDS] [--list] [--remove VERSION]",
    md_cli_fetch_options };
