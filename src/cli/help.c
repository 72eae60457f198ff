/* A command's usage as --help prints it: its synopsis, its summary and its options. */
#include <stdio.h>
#include <string.h>
#include "cli.h"

#define PROGRAM MD_PROGRAM

/* Usage lines: "usage: msda-doctor X" then "       msda-doctor Y" for a multi-line synopsis. */
void md_cli_print_synopsis(FILE *out, const char *synopsis, bool *first)
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
    md_cli_print_synopsis(out, command->synopsis, &first);
    fprintf(out, "\n%s.\n\n", command->summary);
    md_options_print(out, command->options);
}
