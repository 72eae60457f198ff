/* The command table: adding a command is one file, one row here, one section in the man page.
 * Each command's row (its name, summary, synopsis and options) lives in its own file, beside the
 * switch that reads its options; `help` and the overview of all commands live here, with the table. */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "recipes/product.h"

const md_command *const md_commands[] = {
    &md_cmd_inspect, &md_cmd_build, &md_cmd_verify, &md_cmd_diagnose, &md_cmd_fetch, &md_cmd_help, NULL
};

const md_command *md_command_find(const char *name)
{
    for (const md_command *const *c = md_commands; *c; c++)
        if (strcmp((*c)->name, name) == 0)
            return *c;
    return NULL;
}

void md_cli_print_overview(FILE *out)
{
    bool first = true;
    md_cli_print_synopsis(out, "[--version] [--help] COMMAND [ARGS]", &first);
    for (const md_command *const *c = md_commands; *c; c++)
        md_cli_print_synopsis(out, (*c)->synopsis, &first);
    fprintf(out, "\nBuild doctor and cross-arch packager for Multi-Scale Deformable Attention.\n\n"
                 "Commands:\n");
    for (const md_command *const *c = md_commands; *c; c++)
        fprintf(out, "  %-10s %s\n", (*c)->name, (*c)->summary);
    fprintf(out, "\nRun '" MD_PROGRAM " COMMAND --help' for a command's options; see msda-doctor(1).\n");
}

/* The options before a command; the man page's OPTIONS section. */
const md_option md_cli_global_options[] = {
    { 'h', "help", NULL, MD_OPT_SHORT, "print the usage and exit; after a command, that command's usage" },
    { 'V', "version", NULL, MD_OPT_SHORT, "print the version and exit" },
    MD_OPTION_END
};

static const md_option md_cli_help_options[] = {
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

static int cmd_help(int argc, char **argv)
{
    md_getopt options;
    if (!md_getopt_init(&options, "help", md_cli_help_options))
        return MD_EXIT_INTERNAL;
    bool json = false;
    int c;
    while ((c = md_getopt_next(&options, argc, argv)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'h': md_cli_print_help(stdout, &md_cmd_help); return MD_EXIT_OK;
        default: return md_cli_option_error("help", argv, c);
        }
    }
    if (argc - optind > 1)
        return md_cli_usage_error("help", "too many arguments");
    const md_command *cmd = NULL;
    if (optind < argc && !(cmd = md_command_find(argv[optind])))
        return md_cli_usage_error(NULL, "unknown command '%s'", argv[optind]);
    if (!json) {
        if (cmd)
            md_cli_print_help(stdout, cmd);
        else
            md_cli_print_overview(stdout);
        return MD_EXIT_OK;
    }
    json_t *list = json_array();
    for (const md_command *const *c2 = md_commands; list && *c2; c2++) {
        if (cmd && *c2 != cmd)
            continue;
        if (json_array_append_new(list, command_json(*c2)) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    return md_cli_print_json(json_pack("{s:s, s:o, s:o}", "version", MD_VERSION, "options",
                                       md_options_json(md_cli_global_options, false), "commands", list));
}


const md_command md_cmd_help = { "help", cmd_help,
    "Show the help of msda-doctor or of one command",
    "help [--json] [COMMAND]",
    md_cli_help_options };
