/* The compile steps of a build: argument vectors keyed by content in a cache folder, run a few
 * at a time, each writing under a temporary name that is renamed into place only on success.
 * Scope: private to src/lib/build. */
#ifndef MD_BUILD_STEPS_H
#define MD_BUILD_STEPS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include "base/status.h"
#include "base/strv.h"

#define MD_MAX_STEPS 256

typedef struct {
    char **argv;                  /* NULL-terminated, owned */
    char what[96];                /* "sm_86 (CUDA 13.0)", "x86_64 msda_cpu.c", ... */
    char output[PATH_MAX];        /* the file it makes (in the cache) */
    bool cached;                  /* already there: not run */
    bool cacheable;               /* a compilation kept in the cache (not a pack or link step) */
} md_build_step;

typedef struct {
    md_build_step *steps;
    size_t n;
    char **envs[MD_MAX_STEPS];    /* per step: NULL for ours */
    char tmp[MD_MAX_STEPS][PATH_MAX + 8];
} md_step_list;

/* What running steps did. */
typedef struct {
    size_t n_compiled, n_cached;  /* cacheable steps run, and found in the cache */
    char failed_log[PATH_MAX];    /* the log of the step that failed, when one did */
} md_step_counts;

/* Appends a step, taking ARGV's strings and ENV (both freed with the list). A cacheable step
 * whose OUTPUT exists is marked cached. NULL with ERR filled when full or out of memory. */
md_build_step *md_steps_add(md_step_list *s, strv *argv, char **env, const char *what, const char *output,
                            bool cacheable, md_error *err);

/* Runs the steps that are not cached, JOBS at a time, logging each to LOG_DIR/step-N.log. The
 * argument after "-o" is rewritten to OUTPUT.tmp<pid>, renamed to OUTPUT only when the step
 * succeeds, so the cache never holds a partial entry, also with two builds sharing it. A step
 * still running after TIMEOUT_S seconds (0: no limit) is killed. MD_ERR_BUILD naming the first
 * failed step, how it failed (exit status, signal, timeout) and the end of its log. */
md_status md_steps_run(md_step_list *s, const char *log_dir, unsigned jobs, unsigned timeout_s,
                       md_step_counts *counts, md_error *err);

/* Hands the steps' argument vectors to *STEPS (grown) and empties S. False when *STEPS could
 * not grow (out of memory): S's steps are then freed, not handed over. */
bool md_steps_move(md_step_list *s, md_build_step **steps, size_t *n_steps);

void md_build_steps_free(md_build_step *steps, size_t n);

/* sha256, as hex into KEY, over TOOL_VERSION, ARGV but its SKIP_ARG-th string (the output) and
 * with the folder ROOT (the project folder; NULL: none) left out of every argument, SOURCE with
 * every local header it includes from DIR, and EXTRA_FILE when not NULL. */
bool md_content_key(const char *tool_version, char *const *argv, size_t skip_arg, const char *root, const char *dir,
                    const char *source, const char *extra_file, char key[65]);

/* mkdir -p. */
md_status md_ensure_dir(const char *path, md_error *err);

#endif
