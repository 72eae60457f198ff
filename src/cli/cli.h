/* The command-line layer: the only code that prints or exits. */
#ifndef MD_CLI_H
#define MD_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <jansson.h>
#include "status.h"

/* Exit statuses, documented in man/msda-doctor.1 (EXIT STATUS). Never renumber. */
typedef enum {
    MD_EXIT_OK = 0,         /* success, nothing wrong */
    MD_EXIT_PROBLEMS = 1,   /* the command ran and found problems */
    MD_EXIT_USAGE = 2,      /* bad command line */
    MD_EXIT_INPUT = 3,      /* an input file is unreadable, of an unknown kind, or malformed */
    MD_EXIT_BUILD = 4,      /* a compilation or packaging step failed */
    MD_EXIT_NETWORK = 5,    /* a download failed */
    MD_EXIT_CHECKSUM = 6,   /* a download does not match its checksum */
    MD_EXIT_INTERNAL = 9    /* out of memory, broken embedded data, output not written */
} md_exit;

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;   /* one line for `msda-doctor --help` */
    const char *synopsis;  /* the usage line(s) after "msda-doctor "; also in the man page */
    const char *options;   /* the option list printed by `<command> --help` */
} md_command;

extern const md_command md_commands[];

const md_command *md_command_find(const char *name);

/* Prints "msda-doctor: error: MESSAGE" on stderr. */
void md_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints the error, then "Try 'msda-doctor CMD --help' ...", and returns MD_EXIT_USAGE. */
int md_cli_usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The usage error for getopt_long's return C (':' missing value, '?' unknown option). */
int md_cli_option_error(const char *command, char **argv, int c);

/* Prints the usage of COMMAND (or of the whole tool when NULL) to OUT. */
void md_cli_print_help(FILE *out, const md_command *command);

/* Writes DOC to stdout as JSON with a newline, drops the reference; MD_EXIT_INTERNAL on failure. */
int md_cli_print_json(json_t *doc);

/* Maps a library status to the exit status it means. */
md_exit md_cli_exit_for(md_status st);

/* Flushes stdout and reports a failed write; returns CODE, or MD_EXIT_INTERNAL if it failed. */
int md_cli_finish(int code);

/* Command entry points. */
int cmd_inspect(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_diagnose(int argc, char **argv);
int cmd_help(int argc, char **argv);

#endif
