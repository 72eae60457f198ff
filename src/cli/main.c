#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "recipes/product.h"

#define PROGRAM "msda-doctor"

static void verror(const char *fmt, va_list ap)
{
    fputs(PROGRAM ": error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void md_cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verror(fmt, ap);
    va_end(ap);
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

/* Usage lines: "usage: msda-doctor X" then "       msda-doctor Y" for a multi-line synopsis. */
static void print_synopsis(FILE *out, const char *synopsis, bool *first)
{
    const char *line = synopsis;
    while (*line) {
        const char *nl = strchr(line, '\n');
        int len = nl ? (int)(nl - line) : (int)strlen(line);
        fprintf(out, "%s" PROGRAM " %.*s\n", *first ? "usage: " : "       ", len, line);
        *first = false;
        line += len + (nl ? 1 : 0);
    }
}

void md_cli_print_help(FILE *out, const md_command *command)
{
    bool first = true;
    if (command) {
        print_synopsis(out, command->synopsis, &first);
        fprintf(out, "\n%s.\n\n", command->summary);
        md_options_print(out, command->options);
        return;
    }
    print_synopsis(out, "[--version] [--help] COMMAND [ARGS]", &first);
    for (const md_command *c = md_commands; c->name; c++)
        print_synopsis(out, c->synopsis, &first);
    fprintf(out, "\nBuild doctor and cross-arch packager for Multi-Scale Deformable Attention.\n\n"
                 "Commands:\n");
    for (const md_command *c = md_commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\nRun '" PROGRAM " COMMAND --help' for a command's options; see msda-doctor(1).\n");
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

/* The options before a command; the man page's OPTIONS section. */
const md_option md_cli_global_options[] = {
    { 'h', "help", NULL, MD_OPT_SHORT, "print the usage and exit; after a command, that command's usage" },
    { 'V', "version", NULL, MD_OPT_SHORT, "print the version and exit" },
    MD_OPTION_END
};

const md_option md_cli_help_options[] = {
    { 0, "COMMAND", NULL, MD_OPT_POSITIONAL, "the command to describe" },
    { 'j', "json", NULL, 0, "print the commands, their usage and options as JSON" },
    MD_OPTION_HELP,
    MD_OPTION_END
};

static json_t *command_json(const md_command *c)
{
    return json_pack("{s:s, s:s, s:s, s:o, s:o}", "name", c->name, "summary", c->summary, "synopsis",
                     c->synopsis, "arguments", md_options_json(c->options, true), "options",
                     md_options_json(c->options, false));
}

int cmd_help(int argc, char **argv)
{
    md_getopt options;
    if (!md_getopt_init(&options, "help", md_cli_help_options))
        return MD_EXIT_INTERNAL;
    bool json = false;
    int c;
    while ((c = md_getopt_next(&options, argc, argv)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'h': md_cli_print_help(stdout, md_command_find("help")); return MD_EXIT_OK;
        default: return md_cli_option_error("help", argv, c);
        }
    }
    if (argc - optind > 1)
        return md_cli_usage_error("help", "too many arguments");
    const md_command *cmd = NULL;
    if (optind < argc && !(cmd = md_command_find(argv[optind])))
        return md_cli_usage_error(NULL, "unknown command '%s'", argv[optind]);
    if (!json) {
        md_cli_print_help(stdout, cmd);
        return MD_EXIT_OK;
    }
    json_t *list = json_array();
    for (const md_command *c2 = md_commands; list && c2->name; c2++) {
        if (cmd && c2 != cmd)
            continue;
        if (json_array_append_new(list, command_json(c2)) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    return md_cli_print_json(json_pack("{s:s, s:o, s:o}", "version", MD_VERSION, "options",
                                       md_options_json(md_cli_global_options, false), "commands", list));
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(json_alloc, free);
    if (argc < 2)
        return md_cli_usage_error(NULL, "no command given");
    const char *first = argv[1];
    const md_option *global = md_option_find(md_cli_global_options, first);
    switch (global ? global->key : 0) {
    case 'h':
        md_cli_print_help(stdout, NULL);
        return md_cli_finish(MD_EXIT_OK);
    case 'V':
        printf(PROGRAM " %s\n", MD_VERSION);
        return md_cli_finish(MD_EXIT_OK);
    }
    if (first[0] == '-')
        return md_cli_usage_error(NULL, "unknown option '%s'", first);
    const md_command *cmd = md_command_find(first);
    if (!cmd)
        return md_cli_usage_error(NULL, "unknown command '%s'", first);
    opterr = 0; /* our own messages: one line, then the "Try" hint */
    return md_cli_finish(cmd->run(argc - 1, argv + 1));
}
