#include "build_steps.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "base/process.h"
#include "base/write_all.h"

#define MAX_SOURCES 64
#define LOG_TAIL_BYTES 1500

long long md_steps_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- content keys ------------------------------------------------------------------------------ */

/* The file's bytes, then its path with ROOT (the project folder) left out, as hash_arg does:
 * the same sources in two folders give the same key. */
bool md_digest_file(EVP_MD_CTX *ctx, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    char buf[65536];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(buf, 1, sizeof buf, f)) > 0)
        ok = EVP_DigestUpdate(ctx, buf, n);
    ok = ok && !ferror(f);
    fclose(f);
    return ok;
}

bool md_digest_finish(EVP_MD_CTX *ctx, bool ok, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    ok = ok && EVP_DigestFinal_ex(ctx, md, &len) && len == 32;
    EVP_MD_CTX_free(ctx);
    for (unsigned i = 0; ok && i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    return ok;
}

static bool hash_file(EVP_MD_CTX *ctx, const char *path, const char *root)
{
    bool ok = md_digest_file(ctx, path);
    size_t root_len = root ? strlen(root) : 0;
    const char *name = root_len && strncmp(path, root, root_len) == 0 ? path + root_len : path;
    EVP_DigestUpdate(ctx, name, strlen(name) + 1);
    return ok;
}

/* The file and, recursively, the local headers it includes with #include "..." from DIR. False
 * when one that exists cannot be read (out of memory for its stream): a key without it would
 * let a change to it reuse a stale object. */
static bool source_closure(const char *dir, const char *file, char (*list)[PATH_MAX], size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i], file) == 0)
            return true;
    if (*n == MAX_SOURCES)
        return true;
    snprintf(list[(*n)++], PATH_MAX, "%s", file);
    FILE *f = fopen(file, "r");
    if (!f)
        return false;
    bool ok = true;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp(p, "#include \"", 10) != 0)
            continue;
        p += 10;
        size_t len = strcspn(p, "\"");
        char inc[PATH_MAX];
        snprintf(inc, sizeof inc, "%s/%.*s", dir, (int)len, p);
        if (access(inc, R_OK) == 0 && !source_closure(dir, inc, list, n)) {
            ok = false;
            break;
        }
    }
    fclose(f);
    return ok;
}

/* ARG with every occurrence of ROOT replaced by one byte that no path holds, so that the same
 * sources built in two folders (two checkouts, or the embedded sources unpacked under a hash of
 * all of them, Python files included) share their cached objects. */
static bool hash_arg(EVP_MD_CTX *ctx, const char *arg, const char *root)
{
    size_t root_len = root ? strlen(root) : 0;
    const char *at;
    bool ok = true;
    while (ok && root_len && (at = strstr(arg, root)) != NULL) {
        ok = EVP_DigestUpdate(ctx, arg, (size_t)(at - arg)) && EVP_DigestUpdate(ctx, "\x01", 1);
        arg = at + root_len;
    }
    return ok && EVP_DigestUpdate(ctx, arg, strlen(arg) + 1);
}

bool md_content_key(const char *tool_version, char *const *argv, size_t skip_arg, const char *root,
                    const char *dir, const char *source, const char *extra_file, char key[65])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(ctx);
        return false;
    }
    EVP_DigestUpdate(ctx, tool_version, strlen(tool_version) + 1);
    bool ok = true;
    for (size_t i = 0; ok && argv[i]; i++)
        if (i != skip_arg)
            ok = hash_arg(ctx, argv[i], root);
    char (*files)[PATH_MAX] = malloc(MAX_SOURCES * sizeof *files);
    size_t n = 0;
    ok = ok && files != NULL;
    if (ok && source)
        ok = source_closure(dir, source, files, &n);
    for (size_t i = 0; ok && i < n; i++)
        ok = hash_file(ctx, files[i], root);
    if (ok && extra_file)
        ok = hash_file(ctx, extra_file, root);
    free(files);
    return md_digest_finish(ctx, ok, key);
}

/* ---- steps ------------------------------------------------------------------------------------- */

md_build_step *md_steps_add(md_step_list *s, strv *argv, char **env, const char *what, const char *output,
                               bool cacheable, md_error *err)
{
    if (s->n == MD_MAX_STEPS) {
        md_fail(err, MD_ERR_INTERNAL, "too many build steps");
        return NULL;
    }
    md_build_step *grown = realloc(s->steps, (s->n + 1) * sizeof *grown);
    if (!grown) {
        md_fail(err, MD_ERR_NOMEM, "out of memory");
        return NULL;
    }
    s->steps = grown;
    md_build_step *st = &s->steps[s->n];
    memset(st, 0, sizeof *st);
    st->argv = argv->items;
    argv->items = NULL;
    argv->n = 0;
    snprintf(st->what, sizeof st->what, "%s", what);
    snprintf(st->output, sizeof st->output, "%s", output);
    st->cacheable = cacheable;
    st->cached = cacheable && access(output, R_OK) == 0;
    st->after = -1;
    s->envs[s->n] = env;
    s->n++;
    return st;
}

void md_build_tmp_dir(const char *work_dir, char *out, size_t size)
{
    snprintf(out, size, "%s/tmp-%ld", work_dir, (long)getpid());
}

md_status md_ensure_dir(const char *path, md_error *err)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return md_fail(err, MD_ERR_IO, "cannot create '%s': %s", buf, strerror(errno));
    return MD_OK;
}

static void log_tail(const char *log, char *out, size_t size)
{
    out[0] = '\0';
    FILE *f = fopen(log, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, len > LOG_TAIL_BYTES ? len - LOG_TAIL_BYTES : 0, SEEK_SET);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
    for (char *p = out; *p; p++) /* one line, as every error message */
        if (*p == '\n')
            *p = ' ';
}

/* After a step failed: ENOSPC or EDQUOT when the folder its OUTPUT goes to has no room left, found
 * by writing a probe there (removed at once); 0 otherwise. 64 KiB: less than any object or fatbin,
 * so a disk that refuses it could not have taken the step's output either. */
static int out_of_space(const char *output)
{
    static const char zeros[65536];
    char probe[PATH_MAX + 32];
    const char *slash = strrchr(output, '/');
    snprintf(probe, sizeof probe, "%.*s/.space-probe-XXXXXX", slash ? (int)(slash - output) : 1,
             slash ? output : ".");
    int fd = mkstemp(probe);
    if (fd < 0)
        return errno == ENOSPC || errno == EDQUOT ? errno : 0;
    unlink(probe);
    int e = md_write_all(fd, zeros, sizeof zeros);
    if (e == 0 && fsync(fd) != 0)
        e = errno;
    close(fd);
    return e == ENOSPC || e == EDQUOT ? e : 0;
}

/* How a finished step failed, for the message: "exit 1", "killed by signal 9". */
static void describe_status(int status, char *out, size_t size)
{
    if (WIFEXITED(status))
        snprintf(out, size, "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(out, size, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(out, size, "status %d", status);
}

/* Tells the caller about the run, when it listens. */
static void tell(const md_steps_options *o, md_step_event_kind kind, const char *what, bool ok, double seconds,
                 size_t done, size_t total, const md_step_list *s, const pid_t *pids)
{
    if (!o->on_step)
        return;
    md_step_event ev = { .kind = kind, .what = what, .ok = ok, .seconds = seconds, .done = o->done_before + done,
                         .total = o->total ? o->total : total,
                         .elapsed = (double)(md_steps_now_ms() - o->started_ms) / 1000.0 };
    size_t n = 0;
    for (size_t k = 0; k < s->n && n < 3; k++)
        if (!s->steps[k].cached && pids[k] > 0)
            ev.running[n++] = s->steps[k].what;
    o->on_step(o->ctx, &ev);
}

/* Stops every running step: SIGTERM to each one's process group (nvcc and the cicc, ptxas or
 * cc1 it runs), SIGKILL after a grace period for whatever is left, each one reaped and its
 * partial output removed. */
static void stop_running(md_step_list *s, pid_t *pids)
{
    for (size_t k = 0; k < s->n; k++)
        if (!s->steps[k].cached && pids[k] > 0)
            killpg(pids[k], SIGTERM);
    long long deadline = md_steps_now_ms() + 5000;
    bool killed = false;
    for (;;) {
        bool left = false;
        for (size_t k = 0; k < s->n; k++) {
            if (s->steps[k].cached || pids[k] <= 0)
                continue;
            int status;
            pid_t r = waitpid(pids[k], &status, WNOHANG);
            if (r == pids[k] || (r < 0 && errno == ECHILD)) {
                /* What the group's other processes still write goes with the group's SIGKILL. */
                killpg(pids[k], SIGKILL);
                pids[k] = 0;
                if (s->tmp[k][0])
                    unlink(s->tmp[k]);
            } else {
                left = true;
            }
        }
        if (!left)
            return;
        if (!killed && md_steps_now_ms() > deadline) {
            for (size_t k = 0; k < s->n; k++)
                if (!s->steps[k].cached && pids[k] > 0)
                    killpg(pids[k], SIGKILL);
            killed = true;
        }
        struct timespec pause = { 0, 20 * 1000 * 1000 };
        nanosleep(&pause, NULL);
    }
}

md_status md_steps_run(md_step_list *s, const md_steps_options *o, md_step_counts *counts, md_error *err)
{
    pid_t pids[MD_MAX_STEPS] = { 0 };
    long long started[MD_MAX_STEPS];
    bool timed_out[MD_MAX_STEPS] = { false };
    /* Per step: not started, running, ended well (or cached); a step that failed stays running
     * here, which is harmless: nothing starts after a failure. */
    enum { WAITING, RUNNING, ENDED } state[MD_MAX_STEPS] = { WAITING };
    size_t running = 0, done = 0, total = 0;
    unsigned jobs = o->jobs ? o->jobs : 1;
    long long last_tick = md_steps_now_ms();
    md_status st = MD_OK;
    char log[PATH_MAX + 64];
    for (size_t i = 0; i < s->n; i++)
        total += !s->steps[i].cached;
    for (;;) {
        if (o->stop && *o->stop) {
            stop_running(s, pids);
            return md_fail(err, MD_ERR_STOPPED, "stopped: every compile step was stopped and its partial output removed");
        }
        for (size_t i = 0; st == MD_OK && running < jobs && i < s->n; i++) {
            md_build_step *step = &s->steps[i];
            if (state[i] != WAITING || (step->after >= 0 && state[step->after] != ENDED))
                continue;
            if (step->cached) {
                state[i] = ENDED;
                counts->n_cached++;
                continue;
            }
            state[i] = RUNNING;
            /* Named by process, so that two builds sharing a cache never write one file. */
            s->tmp[i][0] = '\0';
            for (size_t a = 1; step->argv[a]; a++)
                if (strcmp(step->argv[a - 1], "-o") == 0) {
                    snprintf(s->tmp[i], sizeof s->tmp[i], "%s.tmp%ld", step->output, (long)getpid());
                    free(step->argv[a]);
                    if (!(step->argv[a] = strdup(s->tmp[i])))
                        return md_fail(err, MD_ERR_NOMEM, "out of memory");
                }
            snprintf(log, sizeof log, "%s/step-%zu.log", o->log_dir, i);
            unlink(log);
            char **env = o->tmp_dir ? md_env_with(s->envs[i], "TMPDIR", o->tmp_dir) : NULL;
            if (o->tmp_dir && !env)
                return md_fail(err, MD_ERR_NOMEM, "out of memory");
            st = md_spawn_logged(step->argv, env ? env : s->envs[i], log, &pids[i], err);
            strv_free(env);
            if (st == MD_OK) {
                running++;
                started[i] = md_steps_now_ms();
                tell(o, MD_STEP_STARTED, step->what, true, 0, done, total, s, pids);
            }
        }
        if (running == 0)
            break;
        int status;
        pid_t finished = waitpid(-1, &status, WNOHANG);
        if (finished < 0) {
            if (errno == EINTR)
                continue;
            return md_fail(err, MD_ERR_INTERNAL, "waitpid: %s", strerror(errno));
        }
        if (finished == 0) {
            /* A compiler that hangs is stopped, with all it started; its step then fails like any other. */
            for (size_t k = 0; o->timeout_s && k < s->n; k++)
                if (!s->steps[k].cached && pids[k] > 0 && !timed_out[k] &&
                    md_steps_now_ms() - started[k] > (long long)o->timeout_s * 1000) {
                    timed_out[k] = true;
                    killpg(pids[k], SIGKILL);
                }
            if (md_steps_now_ms() - last_tick >= 1000) {
                last_tick = md_steps_now_ms();
                tell(o, MD_STEP_TICK, NULL, true, 0, done, total, s, pids);
            }
            struct timespec pause = { 0, 50 * 1000 * 1000 };
            nanosleep(&pause, NULL);
            continue;
        }
        size_t i = 0;
        while (i < s->n && (s->steps[i].cached || pids[i] != finished))
            i++;
        if (i == s->n)
            continue;
        running--;
        done++;
        /* Whatever the step's compiler left running in its group (it exited, they may not have). */
        killpg(pids[i], SIGKILL);
        pids[i] = 0;
        md_build_step *step = &s->steps[i];
        snprintf(log, sizeof log, "%s/step-%zu.log", o->log_dir, i);
        bool exited_ok = !timed_out[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        int rename_errno = 0;
        if (exited_ok && s->tmp[i][0] && rename(s->tmp[i], step->output) != 0)
            rename_errno = errno;
        tell(o, MD_STEP_FINISHED, step->what, exited_ok && !rename_errno,
             (double)(md_steps_now_ms() - started[i]) / 1000.0, done, total, s, pids);
        if (exited_ok && !rename_errno) {
            state[i] = ENDED;
            counts->n_compiled += step->cacheable;
            continue;
        }
        if (s->tmp[i][0])
            unlink(s->tmp[i]);
        if (st == MD_OK) {
            char tail[LOG_TAIL_BYTES + 1], how[48];
            log_tail(log, tail, sizeof tail);
            snprintf(counts->failed_log, sizeof counts->failed_log, "%s", log);
            int full = timed_out[i] ? 0 : out_of_space(step->output);
            if (rename_errno)
                st = md_fail(err, MD_ERR_BUILD, "%s: cannot store '%s': %s", step->what, step->output,
                             strerror(rename_errno));
            else if (full)
                /* The compiler's own words may be lost: its log can be on the same full disk. */
                st = md_fail(err, MD_ERR_BUILD, "%s failed: no room for '%s': %s (log: %s): %s", step->what,
                             step->output, strerror(full), log, tail);
            else {
                if (timed_out[i])
                    snprintf(how, sizeof how, "did not finish in %u s (MSDA_BUILD_STEP_TIMEOUT)", o->timeout_s);
                else
                    describe_status(status, how, sizeof how);
                st = md_fail(err, MD_ERR_BUILD, "%s failed, %s (log: %s): %s", step->what, how, log, tail);
            }
        }
    }
    return st;
}

bool md_steps_move(md_step_list *s, md_build_step **steps, size_t *n_steps)
{
    md_build_step *grown = s->n ? realloc(*steps, (*n_steps + s->n) * sizeof *grown) : NULL;
    bool ok = !s->n || grown;
    if (grown) {
        *steps = grown;
        memcpy(*steps + *n_steps, s->steps, s->n * sizeof *s->steps);
        *n_steps += s->n;
    } else {
        for (size_t i = 0; i < s->n; i++)
            strv_free(s->steps[i].argv);
    }
    for (size_t i = 0; i < s->n; i++)
        strv_free(s->envs[i]);
    free(s->steps);
    memset(s, 0, sizeof *s);
    return ok;
}

void md_build_steps_free(md_build_step *steps, size_t n)
{
    for (size_t i = 0; i < n; i++)
        strv_free(steps[i].argv);
    free(steps);
}
