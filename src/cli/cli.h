/* The command-line layer: the only code that prints or exits. Rooms, bottom up: bytes.c (file
 * bytes shown as valid UTF-8 JSON and as escaped text), output.c (errors,
 * JSON, exit statuses), options.c (option tables), help.c (one command's usage), cmd_<name>.c (a
 * command and its row), commands.c (the table, `help`), main.c. None calls one above it. */
#ifndef MD_CLI_H
#define MD_CLI_H

#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <jansson.h>
#include "base/status.h"

#define MD_PROGRAM "msda-doctor"

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

/* The table, NULL-terminated, in the order of the man page and --help. */
extern const md_command *const md_commands[];

/* The row of the command called NAME, or NULL. */
const md_command *md_command_find(const char *name);

/* Each command's row, defined in its own file. */
extern const md_command md_cmd_inspect, md_cmd_build, md_cmd_verify, md_cmd_diagnose, md_cmd_fetch, md_cmd_help;

/* The options before a command; the man page's OPTIONS section. */
extern const md_option md_cli_global_options[];

/* Bytes from files (names, log lines, kernel and section names) need not be UTF-8 (bytes.c). */

/* A JSON string of TEXT's bytes as they are, UTF-8 or not (null for NULL): for every string taken
 * from a file or its name. md_cli_print_json makes the document valid (md_cli_json_utf8). */
json_t *md_cli_json_bytes(const char *text);

/* Makes every string in DOC valid UTF-8: each byte outside a UTF-8 sequence becomes U+FFFD, and
 * the object holding the string gets a sibling KEY_base64 with the raw bytes (RFC 4648 base64);
 * for an array of strings, KEY_base64 is an array of the same length, null where a string was
 * UTF-8. A sibling exists only where a string was not UTF-8. */
void md_cli_json_utf8(json_t *doc);

/* TEXT for a terminal into OUT (SIZE bytes), which it returns: UTF-8 as it is; each byte outside
 * a UTF-8 sequence, and control characters other than the tab (C0, DEL, C1), as \xNN. Cut at
 * SIZE. */
const char *md_cli_shown(const char *text, char *out, size_t size);

/* md_cli_shown into a buffer of the enclosing block, for one printf argument. */
#define MD_SHOWN_MAX (4 * PATH_MAX + 1)
#define MD_SHOWN(text) md_cli_shown((text), (char[MD_SHOWN_MAX]){ 0 }, MD_SHOWN_MAX)

/* Prints "msda-doctor: error: MESSAGE" on stderr, MESSAGE shown as md_cli_shown shows it. */
void md_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The CLI's words for a library hint: its own option ("" for none). */
const char *md_cli_hint_words(md_hint hint);

/* ERR's message with its hint's words after "; " into OUT, which it returns. */
const char *md_cli_error_text(const md_error *err, char *out, size_t size);

/* Prints ERR's message and hint as md_cli_error does. */
void md_cli_report(const md_error *err);

/* Prints the error, then "Try 'msda-doctor CMD --help' ...", and returns MD_EXIT_USAGE. */
int md_cli_usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The usage error for getopt_long's return C (':' missing value, '?' unknown option). */
int md_cli_option_error(const char *command, char **argv, int c);

/* Prints the usage line(s) of SYNOPSIS: "usage: msda-doctor ..." first (FIRST true), then
 * indented; clears FIRST. */
void md_cli_print_synopsis(FILE *out, const char *synopsis, bool *first);

/* Prints the usage of COMMAND to OUT. */
void md_cli_print_help(FILE *out, const md_command *command);

/* Prints the usage of the whole tool (every command's synopsis and summary) to OUT. */
void md_cli_print_overview(FILE *out);

/* Routes jansson's allocations through md_cli_print_json's check; called once, first. */
void md_cli_json_init(void);

/* Writes DOC to stdout as JSON with a newline, its strings made UTF-8 first (md_cli_json_utf8),
 * drops the reference; MD_EXIT_INTERNAL on failure. */
int md_cli_print_json(json_t *doc);

/* Maps a library status to the exit status it means. */
md_exit md_cli_exit_for(md_status st);

/* Flushes stdout and reports a failed write; returns CODE, or MD_EXIT_INTERNAL if it failed. */
int md_cli_finish(int code);

/* A download's progress line on stderr (see progress.c). */
typedef struct {
    char what[48];
    struct timespec start, last;
    bool shown, finished;
} md_cli_progress;

/* An md_http_progress_fn: CTX is an md_cli_progress, zeroed before the first call. */
void md_cli_progress_update(void *ctx, const char *what, uint64_t done, uint64_t total);

/* Ends a progress line left unfinished (a failed or cut-off download) and starts afresh. */
void md_cli_progress_end(md_cli_progress *p);

/* Whether progress is shown: stderr is a terminal. */
bool md_cli_progress_wanted(void);

#endif
