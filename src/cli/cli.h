/* The command-line layer: the only code that prints or exits. */
#ifndef MD_CLI_H
#define MD_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <jansson.h>
#include "base/status.h"

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

/* One row of a command's option table, the one place an option is written: getopt_long's
 * tables, the list in `CMD --help`, `help --json` and the man page test all come from it. */
typedef enum {
    MD_OPT_SHORT = 1u << 0,      /* KEY is also accepted as -KEY */
    MD_OPT_REPEATABLE = 1u << 1, /* may be given more than once ("..." in the synopsis) */
    MD_OPT_POSITIONAL = 1u << 2, /* not an option: an argument such as FILE, listed for --help */
    MD_OPT_REQUIRED = 1u << 3    /* the command needs it: written without brackets in the synopsis */
} md_option_flags;

typedef struct {
    int key;             /* what md_getopt_next returns for it: a letter, never ':' or '?' */
    const char *name;    /* long name without "--", or a positional argument's name (FILE|DIR) */
    const char *value;   /* metavariable of the value it takes (ARCH, N); NULL for a flag */
    unsigned flags;      /* md_option_flags */
    const char *help;    /* one sentence without a full stop; --help wraps it */
} md_option;

/* The last row of a table. */
#define MD_OPTION_END { 0, NULL, NULL, 0, NULL }
/* The -h, --help row every command has. */
#define MD_OPTION_HELP { 'h', "help", NULL, MD_OPT_SHORT, "show this help" }

/* Most rows a table may have, MD_OPTION_END not counted. */
#define MD_MAX_OPTIONS 32

/* getopt_long's tables, made from an md_option table at run time. */
typedef struct {
    struct option longopts[MD_MAX_OPTIONS + 1];
    char shortopts[1 + 2 * MD_MAX_OPTIONS + 1];
} md_getopt;

/* Fills G from TABLE. False, with an internal error printed, when the table is broken: too
 * long, a key used twice, or a key getopt_long uses for its errors. */
bool md_getopt_init(md_getopt *g, const char *command, const md_option *table);

/* getopt_long over G: the key of the next option (optarg holds its value), ':' for a missing
 * value, '?' for an unknown option, -1 after the last option. */
int md_getopt_next(md_getopt *g, int argc, char **argv);

/* The row of TABLE that ARG spells exactly ("--help" or "-h"), or NULL. */
const md_option *md_option_find(const md_option *table, const char *arg);

/* Prints TABLE as `--help` lists it: two spaces, the name column, the wrapped help. */
void md_options_print(FILE *out, const md_option *table);

/* TABLE's options (POSITIONAL false) or positional arguments (true) as a JSON array of
 * {name, short, value, repeatable, help}; NULL when out of memory. */
json_t *md_options_json(const md_option *table, bool positional);

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;   /* one line for `msda-doctor --help` */
    const char *synopsis;  /* the usage line(s) after "msda-doctor "; also in the man page */
    const md_option *options; /* its options and arguments, owned by the command's own file */
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

/* The option tables, each beside the code that parses it. */
extern const md_option md_cli_global_options[];
extern const md_option md_cli_inspect_options[];
extern const md_option md_cli_build_options[];
extern const md_option md_cli_verify_options[];
extern const md_option md_cli_diagnose_options[];
extern const md_option md_cli_fetch_options[];
extern const md_option md_cli_help_options[];

/* Command entry points. */
int cmd_inspect(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_diagnose(int argc, char **argv);
int cmd_fetch(int argc, char **argv);

/* For `build --fetch`: fetches CUDA RELEASE from the redist archives into the fetch cache with
 * fetch's defaults ($MSDA_CUDA_MIRROR, retries, timeouts, progress on a terminal), its folder into
 * TOOLKIT_DIR. Returns fetch's status; ERR says why. */
md_status md_cli_fetch_for_build(const char *release, char *toolkit_dir, size_t size, md_error *err);
int cmd_help(int argc, char **argv);

#endif
