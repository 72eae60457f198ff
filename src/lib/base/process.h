/* Running other programs: always from an argument vector (posix_spawn), never through a shell.
 * Scope: library: higher subsystems of src/lib may include it, src/cli may not. */
#ifndef MD_PROCESS_H
#define MD_PROCESS_H

#include <stddef.h>
#include <sys/types.h>
#include "status.h"

typedef struct {
    int exit_code;     /* the program's exit status; -1 when it was killed or could not start */
    char *output;      /* stdout and stderr together, NUL-terminated; owned, free with free() */
    size_t length;
    int timed_out;
} md_run_result;

/* Runs ARGV[0] (searched on PATH when it has no '/') with ARGV and the environment ENVP (NULL:
 * ours), capturing at most MAX_OUTPUT bytes of its output, killing it after TIMEOUT_S seconds.
 * Returns MD_OK when the program ran (whatever its exit status), MD_ERR_IO when it could not be
 * started (the message says why). */
md_status md_run_capture(char *const argv[], char *const envp[], unsigned timeout_s, size_t max_output,
                         md_run_result *res, md_error *err);

void md_run_result_free(md_run_result *res);

/* md_run_capture in two steps, so that other work can run while the program does: the child
 * started with its output on a pipe (which it may fill and then wait on), and its end collected. */
typedef struct {
    pid_t pid;
    int fd;
    long long deadline_ms;       /* CLOCK_MONOTONIC */
    char name[128];
} md_child;

md_status md_run_start(char *const argv[], char *const envp[], unsigned timeout_s, md_child *child, md_error *err);
/* Reads CHILD's output to its end (killing it at its deadline) and waits for it; always closes
 * and reaps it. Results and errors as md_run_capture. */
md_status md_run_finish(md_child *child, size_t max_output, md_run_result *res, md_error *err);

/* Starts ARGV with ENVP (NULL: ours), its stdout and stderr appended to LOG_PATH; *PID receives
 * the child, which leads a process group of its own (its id is *PID), so that killpg reaches
 * everything it starts (nvcc's cicc and ptxas) and a terminal's signals reach only the caller.
 * The caller waits for it (waitpid). */
md_status md_spawn_logged(char *const argv[], char *const envp[], const char *log_path, pid_t *pid,
                          md_error *err);

/* A copy of BASE (NULL: our environment) with NAME set to VALUE, NULL-terminated; free with
 * strv_free. NULL when out of memory. */
char **md_env_with(char *const *base, const char *name, const char *value);

/* md_env_with(NULL, "PATH", PATH_VALUE). */
char **md_env_with_path(const char *path_value);

/* The absolute path of NAME found on PATH into OUT (size SIZE); returns 0, or -1 if not found. */
int md_which(const char *name, char *out, size_t size);

#endif
