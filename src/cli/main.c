/* msda-doctor's entry point: the global options, then the command the table names. */
#include <getopt.h>
#include <stdio.h>
#include "cli.h"
#include "recipes/product.h"

int main(int argc, char **argv)
{
    md_cli_json_init();
    if (argc < 2)
        return md_cli_usage_error(NULL, "no command given");
    const char *first = argv[1];
    const md_option *global = md_option_find(md_cli_global_options, first);
    switch (global ? global->key : 0) {
    case 'h':
        md_cli_print_overview(stdout);
        return md_cli_finish(MD_EXIT_OK);
    case 'V':
        printf(MD_PROGRAM " %s\n", MD_VERSION);
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
