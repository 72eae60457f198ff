/* The compile steps of a build: argument vectors keyed by content in a cache folder, run a few
 * at a time, each writing under a temporary name that is renamed into place only on success.
 * Scope: private to src/lib/build. */
#ifndef MD_BUILD_STEPS_H
#define MD_BUILD_STEPS_H

#include <openssl/evp.h>
#include <limits.h>
#include <signal.h>
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
    bool cacheable;               /* a compilation (not a pack or link step): done already when
                                     OUTPUT exists (a cache entry; the PTX, in the build's own
                                     temporary folder, never does) */
    long after;                   /* the index of the step whose output it reads, which must end
                                     well before it starts; -1: none (md_steps_add's default) */
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

/* What a run of steps tells its caller as it goes. */
typedef enum {
    MD_STEP_STARTED,   /* WHAT started */
    MD_STEP_FINISHED,  /* WHAT ended: OK, after SECONDS */
    MD_STEP_TICK       /* about once a second while steps run */
} md_step_event_kind;

typedef struct {
    md_step_event_kind kind;
    const char *what;         /* the step; NULL for a tick */
    bool ok;
    double seconds;           /* FINISHED: how long the step ran */
    size_t done, total;       /* steps ended and steps to run (the cached ones are not run) */
    const char *running[4];   /* some of the steps running now, NULL-terminated */
    double elapsed;           /* seconds since the first step of the build started */
} md_step_event;

typedef void (*md_step_fn)(void *ctx, const md_step_event *ev);

typedef struct {
    const char *log_dir;      /* LOG_DIR/step-N.log */
    const char *tmp_dir;      /* every step's TMPDIR (nvcc's temporary files); the caller makes
                                 and removes it; NULL: the environment's */
    unsigned jobs;            /* steps at a time, at least 1 */
    unsigned timeout_s;       /* a step running longer is killed; 0: no limit */
    const volatile sig_atomic_t *stop; /* when it becomes non-zero: stop; NULL: never */
    md_step_fn on_step;       /* optional */
    void *ctx;
    long long started_ms;     /* the build's start (CLOCK_MONOTONIC ms) for ELAPSED; 0: this run's */
    size_t done_before, total; /* the count of steps ended in earlier runs, and of all runs' steps */
} md_steps_options;

/* Runs the steps that are not cached, O->JOBS at a time (a step once the step it comes after
 * has ended well, the first such in the list first), each leading its own process group,
 * logging each to LOG_DIR/step-N.log. The argument after "-o" is rewritten to OUTPUT.tmp<pid>,
 * renamed to OUTPUT only when the step succeeds, so the cache never holds a partial entry, also
 * with two builds sharing it. A step still running after TIMEOUT_S seconds is killed, with
 * everything it started. When *O->STOP becomes non-zero, every running step's process group
 * gets SIGTERM (SIGKILL 5 s later for what is left), their partial outputs are removed, and the
 * run returns MD_ERR_STOPPED once all are reaped. MD_ERR_BUILD naming the first failed step, how
 * it failed (exit status, signal, timeout) and the end of its log. */
md_status md_steps_run(md_step_list *s, const md_steps_options *o, md_step_counts *counts, md_error *err);

/* CLOCK_MONOTONIC in milliseconds. */
long long md_steps_now_ms(void);

/* Hands the steps' argument vectors to *STEPS (grown) and empties S. False when *STEPS could
 * not grow (out of memory): S's steps are then freed, not handed over. */
bool md_steps_move(md_step_list *s, md_build_step **steps, size_t *n_steps);

void md_build_steps_free(md_build_step *steps, size_t n);

/* The digests behind the build's keys (sha256): a file's bytes added to CTX (false when it
 * cannot be read), and CTX finished into 64 hex digits and freed (false when OK was false or
 * the digest failed: then HEX is not written). */
bool md_digest_file(EVP_MD_CTX *ctx, const char *path);
bool md_digest_finish(EVP_MD_CTX *ctx, bool ok, char hex[65]);

/* sha256, as hex into KEY, over TOOL_VERSION, ARGV but its SKIP_ARG-th string (the output) and
 * with the folder ROOT (the project folder; NULL: none) left out of every argument, SOURCE with
 * every local header it includes from DIR (none when SOURCE is NULL), and EXTRA_FILE when not
 * NULL. */
bool md_content_key(const char *tool_version, char *const *argv, size_t skip_arg, const char *root, const char *dir,
                    const char *source, const char *extra_file, char key[65]);

/* This build's own temporary folder in WORK_DIR (named by process id): every step's TMPDIR and
 * where the PTX of the device steps goes, removed when the build ends, however it ends. */
void md_build_tmp_dir(const char *work_dir, char *out, size_t size);

/* mkdir -p. */
md_status md_ensure_dir(const char *path, md_error *err);

#endif
