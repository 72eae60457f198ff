/* A progress line for downloads, on stderr when it is a terminal: bytes, rate, time left. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"


static double seconds_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

void md_cli_progress_update(void *ctx, const char *what, uint64_t done, uint64_t total)
{
    md_cli_progress *p = ctx;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (strcmp(p->what, what) != 0) {
        if (p->shown && !p->finished)
            fputc('\n', stderr);
        snprintf(p->what, sizeof p->what, "%s", what);
        p->start = now;
        p->shown = p->finished = false;
    } else if (p->finished || (p->shown && seconds_between(&p->last, &now) < 0.2 && done != total)) {
        return;
    }
    p->last = now;
    double elapsed = seconds_between(&p->start, &now), mb = 1024.0 * 1024.0;
    double rate = elapsed > 0.0 ? (double)done / elapsed : 0.0;
    fprintf(stderr, "\r  %-12s %8.1f", what, (double)done / mb);
    if (total)
        fprintf(stderr, " / %.1f MiB  %3d%%", (double)total / mb, (int)(100.0 * (double)done / (double)total));
    else
        fputs(" MiB", stderr);
    fprintf(stderr, "  %6.1f MiB/s", rate / mb);
    if (total && rate > 0.0 && done < total)
        fprintf(stderr, "  %4.0f s left ", (double)(total - done) / rate);
    else
        fputs("             ", stderr);
    p->shown = true;
    if (total && done == total) {
        fputc('\n', stderr);
        p->finished = true;
    }
}

void md_cli_progress_end(md_cli_progress *p)
{
    if (p->shown && !p->finished)
        fputc('\n', stderr);
    p->shown = p->finished = false;
    p->what[0] = '\0';
}

bool md_cli_progress_wanted(void)
{
    return isatty(STDERR_FILENO);
}
