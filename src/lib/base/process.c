#include "process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>
#include "strv.h"

extern char **environ;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int start(char *const argv[], char *const envp[], int out_fd, bool own_group, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out_fd, STDERR_FILENO);
    if (own_group) {
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&attr, 0);
    }
    int rc = strchr(argv[0], '/') ? posix_spawn(pid, argv[0], &fa, &attr, argv, envp ? envp : environ)
                                  : posix_spawnp(pid, argv[0], &fa, &attr, argv, envp ? envp : environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

md_status md_run_start(char *const argv[], char *const envp[], unsigned timeout_s, md_child *child, md_error *err)
{
    memset(child, 0, sizeof *child);
    child->fd = -1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return md_fail(err, MD_ERR_IO, "pipe: %s", strerror(errno));
    int rc = start(argv, envp, fds[1], false, &child->pid);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        return md_fail(err, MD_ERR_IO, "cannot run '%s': %s", argv[0], strerror(rc));
    }
    child->fd = fds[0];
    child->deadline_ms = now_ms() + (long long)timeout_s * 1000;
    snprintf(child->name, sizeof child->name, "%s", argv[0]);
    return MD_OK;
}

md_status md_run_finish(md_child *child, size_t max_output, md_run_result *res, md_error *err)
{
    memset(res, 0, sizeof *res);
    res->exit_code = -1;
    size_t cap = 4096;
    res->output = malloc(cap);
    bool open = true;
    while (open && res->output) {
        long long left = child->deadline_ms - now_ms();
        if (left <= 0) {
            res->timed_out = 1;
            kill(child->pid, SIGKILL);
            break;
        }
        struct pollfd p = { .fd = child->fd, .events = POLLIN };
        int r = poll(&p, 1, (int)(left > 1000 ? 1000 : left));
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        char chunk[4096];
        ssize_t n = read(child->fd, chunk, sizeof chunk);
        if (n <= 0) {
            open = n < 0 && errno == EINTR;
            continue;
        }
        size_t keep = res->length + (size_t)n > max_output ? max_output - res->length : (size_t)n;
        if (res->length + keep + 1 > cap) {
            while (res->length + keep + 1 > cap)
                cap *= 2;
            char *grown = realloc(res->output, cap);
            if (!grown) {
                free(res->output);
                res->output = NULL;
                break;
            }
            res->output = grown;
        }
        memcpy(res->output + res->length, chunk, keep);
        res->length += keep;
    }
    close(child->fd);
    child->fd = -1;
    int status;
    while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!res->output) {
        md_run_result_free(res);
        return md_fail(err, MD_ERR_NOMEM, "out of memory reading the output of '%s'", child->name);
    }
    res->output[res->length] = '\0';
    res->exit_code = WIFEXITED(status) && !res->timed_out ? WEXITSTATUS(status) : -1;
    return MD_OK;
}

md_status md_run_capture(char *const argv[], char *const envp[], unsigned timeout_s, size_t max_output,
                         md_run_result *res, md_error *err)
{
    md_child child;
    memset(res, 0, sizeof *res);
    res->exit_code = -1;
    md_status st = md_run_start(argv, envp, timeout_s, &child, err);
    return st == MD_OK ? md_run_finish(&child, max_output, res, err) : st;
}

void md_run_result_free(md_run_result *res)
{
    free(res->output);
    memset(res, 0, sizeof *res);
}

md_status md_spawn_logged(char *const argv[], char *const envp[], const char *log_path, pid_t *pid,
                          md_error *err)
{
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return md_fail(err, MD_ERR_IO, "cannot open '%s': %s", log_path, strerror(errno));
    int rc = start(argv, envp, fd, true, pid);
    close(fd);
    if (rc != 0)
        return md_fail(err, MD_ERR_IO, "cannot run '%s': %s", argv[0], strerror(rc));
    return MD_OK;
}

char **md_env_with(char *const *base, const char *name, const char *value)
{
    if (!base)
        base = environ;
    size_t n = 0, name_len = strlen(name);
    while (base[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (!(strncmp(base[i], name, name_len) == 0 && base[i][name_len] == '=') && !(env[j++] = strdup(base[i])))
            goto fail;
    size_t len = name_len + strlen(value) + 2;
    if (!(env[j] = malloc(len)))
        goto fail;
    snprintf(env[j], len, "%s=%s", name, value);
    return env;
fail:
    strv_free(env);
    return NULL;
}

char **md_env_with_path(const char *path_value)
{
    return md_env_with(NULL, "PATH", path_value);
}



int md_which(const char *name, char *out, size_t size)
{
    const char *path = getenv("PATH");
    if (!path || strchr(name, '/'))
        return -1;
    const char *p = path;
    while (*p) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len > 0) {
            snprintf(out, size, "%.*s/%s", (int)len, p, name);
            if (access(out, X_OK) == 0)
                return 0;
        }
        p += len + (colon ? 1 : 0);
    }
    return -1;
}
