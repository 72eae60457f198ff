/* What the command line writes besides each command's own output: error lines, JSON documents,
 * the exit status a library status means, and the last check that stdout was written. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

#define PROGRAM MD_PROGRAM

/* The message is shown escaped: it may carry a file's name, whose bytes need not be text. */
static void verror(const char *fmt, va_list ap)
{
    char message[2048];
    vsnprintf(message, sizeof message, fmt, ap);
    fprintf(stderr, PROGRAM ": error: %s\n", MD_SHOWN(message));
}

void md_cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(fmt, ap);
    va_end(ap);
}

#define HINT_TOOLKIT "give a toolkit with --toolkit DIR"
#define HINT_PLATFORM "name one with --platform PLATFORM"
#define HINT_PYTHON "name one with --python PATH"
#define HINT_ALLOW_HTTP "give --allow-http to fetch it anyway"
#define HINT_REDIST "fetch without --wheels or --index-url"
#define HINT_SEARCH "add folders with --search DIR"

const char *md_cli_hint_words(md_hint hint)
{
    switch (hint) {
    case MD_HINT_NONE: return "";
    case MD_HINT_TOOLKIT: return HINT_TOOLKIT;
    case MD_HINT_PLATFORM: return HINT_PLATFORM;
    case MD_HINT_PYTHON: return HINT_PYTHON;
    case MD_HINT_ALLOW_HTTP: return HINT_ALLOW_HTTP;
    case MD_HINT_REDIST: return HINT_REDIST;
    case MD_HINT_SEARCH: return HINT_SEARCH;
    }
    return "";
}

const char *md_cli_error_text(const md_error *err, char *out, size_t size)
{
    const char *words = md_cli_hint_words(err->hint);
    snprintf(out, size, "%s%s%s", err->message, *words ? "; " : "", words);
    return out;
}

void md_cli_report(const md_error *err)
{
    char text[sizeof err->message + 64];
    md_cli_error("%s", md_cli_error_text(err, text, sizeof text));
}

int md_cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(fmt, ap);
    va_end(ap);
    if (command)
        fprintf(stderr, "Try '" PROGRAM " %s --help' for more information.\n", command);
    else
        fprintf(stderr, "Try '" PROGRAM " --help' for more information.\n");
    return MD_EXIT_USAGE;
}

int md_cli_option_error(const char *command, char **argv, int c)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (c == ':')
        return md_cli_usage_error(command, "option '%s' needs a value", arg);
    return md_cli_usage_error(command, "unknown option '%s'", arg);
}

/* jansson's builders take a NULL (a failed allocation) as a value and leave the member out: a
 * document missing parts would be printed as whole. Its allocations go through here instead,
 * and a document built while one failed is not printed. */
static bool json_alloc_failed;

static void *json_alloc(size_t size)
{
    void *p = malloc(size);
    if (!p)
        json_alloc_failed = true;
    return p;
}

int md_cli_print_json(json_t *doc)
{
    if (doc)
        md_cli_json_utf8(doc);
    if (!doc || json_alloc_failed) {
        json_decref(doc);
        md_cli_error("out of memory building the JSON output");
        return MD_EXIT_INTERNAL;
    }
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (rc != 0 || fputc('\n', stdout) == EOF) {
        md_cli_error("cannot write the JSON output");
        return MD_EXIT_INTERNAL;
    }
    return MD_EXIT_OK;
}

md_exit md_cli_exit_for(md_status st)
{
    switch (st) {
    case MD_OK: return MD_EXIT_OK;
    case MD_ERR_IO:
    case MD_ERR_FORMAT:
    case MD_ERR_UNKNOWN_TYPE: return MD_EXIT_INPUT;
    case MD_ERR_ARGUMENT: return MD_EXIT_USAGE;
    case MD_ERR_NOMEM:
    case MD_ERR_INTERNAL: return MD_EXIT_INTERNAL;
    case MD_ERR_UNSUPPORTED:
    case MD_ERR_STOPPED: /* build re-raises the signal that stopped it; this is for the rest */
    case MD_ERR_BUILD: return MD_EXIT_BUILD;
    case MD_ERR_NETWORK: return MD_EXIT_NETWORK;
    case MD_ERR_CHECKSUM: return MD_EXIT_CHECKSUM;
    }
    return MD_EXIT_INTERNAL;
}

int md_cli_finish(int code)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, PROGRAM ": error: cannot write the output: %s\n", strerror(errno));
        return MD_EXIT_INTERNAL;
    }
    return code;
}

void md_cli_json_init(void)
{
    json_set_alloc_funcs(json_alloc, free);
}
