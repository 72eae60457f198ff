/* The command table: adding a command is one file, one row here, one section in the man page.
 * Each command's options live in its own file, beside the switch that reads them. */
#include <string.h>
#include "cli.h"

const md_command md_commands[] = {
    { "inspect", cmd_inspect,
      "Tell what GPU code a binary carries and where it can run",
      "inspect [--json] [-v] [--gpu ARCH]... FILE|DIR...",
      md_cli_inspect_options },
    { "build", cmd_build,
      "Compile the MSDA kernels for every architecture and package them per CPU platform",
      "build [--json] [--dry-run] [--fetch] [--arch SPEC] [--platform LIST] [--toolkit DIR]... [--define NAME=VALUE]... [-j N] [--source DIR] [--out DIR] [--cache DIR]",
      md_cli_build_options },
    { "verify", cmd_verify,
      "Check a built wheel here: its RECORD, and its kernels on the CPU and every GPU",
      "verify [--json] WHEEL",
      md_cli_verify_options },
    { "diagnose", cmd_diagnose,
      "Probe this machine, read failing logs, and name each cause and the command that fixes it",
      "diagnose [--json] [-v] [--list] [--no-probe] [--foreign] [--python PATH] [--search DIR]... [--root DIR] [LOG...|-]",
      md_cli_diagnose_options },
    { "fetch", cmd_fetch,
      "Download a CUDA toolkit from NVIDIA's redist archives or compiler wheels, checksummed; list or remove one",
      "fetch [--json] [--cuda VERSION] [--wheels] [--index-url URL] [--platform PLATFORM] [--mirror URL] [--dest DIR] [--allow-http] [--retries N] [--timeout SECONDS] [--list] [--remove VERSION]",
      md_cli_fetch_options },
    { "help", cmd_help,
      "Show the help of msda-doctor or of one command",
      "help [--json] [COMMAND]",
      md_cli_help_options },
    { NULL, NULL, NULL, NULL, NULL }
};

const md_command *md_command_find(const char *name)
{
    for (const md_command *c = md_commands; c->name; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}
