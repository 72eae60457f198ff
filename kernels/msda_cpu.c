/* The CPU path: forward and backward, multithreaded with POSIX threads. */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "msda_half.h"
#include "msda_internal.h"

#define CPU_MAX_THREADS 256

/* One instantiation per (value type, coordinate type): the four uniform ones, and f16 and bf16
 * values with f32 coordinates (mixed precision). */
#define CPU_T float
#define CPU_A float
#define CPU_C float
#define CPU_LOAD(x) (x)
#define CPU_STORE(a) (a)
#define CPU_CLOAD(x) (x)
#define CPU_CSTORE(a) (a)
#define CPU_FLOOR floorf
#define CPU_EXP expf
#define CPU_NAME(x) x##_f32
#include "msda_cpu_impl.h"
#undef CPU_T
#undef CPU_A
#undef CPU_C
#undef CPU_LOAD
#undef CPU_STORE
#undef CPU_CLOAD
#undef CPU_CSTORE
#undef CPU_FLOOR
#undef CPU_EXP
#undef CPU_NAME

#define CPU_T double
#define CPU_A double
#define CPU_C double
#define CPU_LOAD(x) (x)
#define CPU_STORE(a) (a)
#define CPU_CLOAD(x) (x)
#define CPU_CSTORE(a) (a)
#define CPU_FLOOR floor
#define CPU_EXP exp
#define CPU_NAME(x) x##_f64
#include "msda_cpu_impl.h"
#undef CPU_T
#undef CPU_A
#undef CPU_C
#undef CPU_LOAD
#undef CPU_STORE
#undef CPU_CLOAD
#undef CPU_CSTORE
#undef CPU_FLOOR
#undef CPU_EXP
#undef CPU_NAME

/* 16-bit values: coordinates in the same type, or in f32. */
#define CPU_T uint16_t
#define CPU_A float
#define CPU_FLOOR floorf
#define CPU_EXP expf
#define CPU_LOAD(x) msda_f16_to_f32(x)
#define CPU_STORE(a) msda_f32_to_f16(a)
#define CPU_C uint16_t
#define CPU_CLOAD(x) msda_f16_to_f32(x)
#define CPU_CSTORE(a) msda_f32_to_f16(a)
#define CPU_NAME(x) x##_f16
#include "msda_cpu_impl.h"
#undef CPU_C
#undef CPU_CLOAD
#undef CPU_CSTORE
#undef CPU_NAME
#define CPU_C float
#define CPU_CLOAD(x) (x)
#define CPU_CSTORE(a) (a)
#define CPU_NAME(x) x##_f16c32
#include "msda_cpu_impl.h"
#undef CPU_LOAD
#undef CPU_STORE
#undef CPU_C
#undef CPU_CLOAD
#undef CPU_CSTORE
#undef CPU_NAME

#define CPU_LOAD(x) msda_bf16_to_f32(x)
#define CPU_STORE(a) msda_f32_to_bf16(a)
#define CPU_C uint16_t
#define CPU_CLOAD(x) msda_bf16_to_f32(x)
#define CPU_CSTORE(a) msda_f32_to_bf16(a)
#define CPU_NAME(x) x##_bf16
#include "msda_cpu_impl.h"
#undef CPU_C
#undef CPU_CLOAD
#undef CPU_CSTORE
#undef CPU_NAME
#define CPU_C float
#define CPU_CLOAD(x) (x)
#define CPU_CSTORE(a) (a)
#define CPU_NAME(x) x##_bf16c32
#include "msda_cpu_impl.h"
#undef CPU_T
#undef CPU_A
#undef CPU_C
#undef CPU_LOAD
#undef CPU_STORE
#undef CPU_CLOAD
#undef CPU_CSTORE
#undef CPU_FLOOR
#undef CPU_EXP
#undef CPU_NAME

/* One thread's share: items [begin, end) of a forward or a backward. */
typedef struct cpu_task {
    const msda_problem *pb;
    const msda_forward_args *fwd; /* exactly one of fwd, bwd is set */
    const msda_backward_args *bwd;
    int64_t begin, end;
    size_t scratch_bytes;
    int out_of_memory;
} cpu_task;

static void *cpu_task_run(void *arg) {
    cpu_task *t = arg;
    void *scratch = malloc(t->scratch_bytes);
    if (!scratch) {
        t->out_of_memory = 1;
        return NULL;
    }
    const int c32 = t->pb->coord_f32;
    if (t->fwd) {
        switch (t->pb->dtype) {
        case MSDA_F32: forward_f32(t->pb, t->fwd, t->begin, t->end, scratch); break;
        case MSDA_F64: forward_f64(t->pb, t->fwd, t->begin, t->end, scratch); break;
        case MSDA_F16: (c32 ? forward_f16c32 : forward_f16)(t->pb, t->fwd, t->begin, t->end, scratch); break;
        case MSDA_BF16: (c32 ? forward_bf16c32 : forward_bf16)(t->pb, t->fwd, t->begin, t->end, scratch); break;
        }
    } else {
        switch (t->pb->dtype) {
        case MSDA_F32: backward_f32(t->pb, t->bwd, t->begin, t->end, scratch); break;
        case MSDA_F64: backward_f64(t->pb, t->bwd, t->begin, t->end, scratch); break;
        case MSDA_F16: (c32 ? backward_f16c32 : backward_f16)(t->pb, t->bwd, t->begin, t->end, scratch); break;
        case MSDA_BF16: (c32 ? backward_bf16c32 : backward_bf16)(t->pb, t->bwd, t->begin, t->end, scratch); break;
        }
    }
    free(scratch);
    return NULL;
}

/* The CPUs this process may run on (its affinity: taskset, a container's or a scheduler's
 * cpuset), which can be far fewer than the machine's: a thread for each online CPU there only
 * queues threads behind each other. The online count where the affinity cannot be read. */
int msda_cpu_default_threads(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online <= 0 ? 1 : online > CPU_MAX_THREADS ? CPU_MAX_THREADS : (int)online;
}

static int thread_count(int requested, int64_t items) {
    int64_t n = requested ? requested : msda_cpu_default_threads();
    if (n > CPU_MAX_THREADS) n = CPU_MAX_THREADS;
    if (n > items) n = items;
    return (int)n;
}

/* Splits `items` into contiguous shares, runs them on threads (the caller's thread takes the
 * first share, and any share whose thread could not be started), and waits for all. */
static msda_status run_tasks(const cpu_task *proto, int64_t items, int threads, msda_error *err) {
    cpu_task tasks[CPU_MAX_THREADS];
    pthread_t ids[CPU_MAX_THREADS];
    int started[CPU_MAX_THREADS];
    const int n = thread_count(threads, items);
    for (int i = 0; i < n; i++) {
        tasks[i] = *proto;
        tasks[i].begin = items * i / n;
        tasks[i].end = items * (i + 1) / n;
        started[i] = 0;
    }
    for (int i = 1; i < n; i++) started[i] = pthread_create(&ids[i], NULL, cpu_task_run, &tasks[i]) == 0;
    cpu_task_run(&tasks[0]);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(ids[i], NULL);
        else
            cpu_task_run(&tasks[i]);
    }
    for (int i = 0; i < n; i++)
        if (tasks[i].out_of_memory)
            return msda_fail(err, MSDA_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of scratch",
                             proto->scratch_bytes);
    return MSDA_OK;
}

static msda_status host_table_needed(msda_error *err) {
    return msda_fail(err, MSDA_ERR_BAD_ARGUMENT,
                     "the CPU path needs spatial_shapes and level_start in host memory (level_table "
                     "is MSDA_DEVICE)");
}

static size_t acc_size(msda_dtype dtype) { return dtype == MSDA_F64 ? sizeof(double) : sizeof(float); }

msda_status msda_forward_cpu(const msda_forward_args *a, int threads, msda_error *err) {
    msda_problem pb;
    msda_status st = msda_check_forward(a, &pb, err);
    if (st != MSDA_OK) return st;
    if (threads < 0) return msda_fail(err, MSDA_ERR_BAD_ARGUMENT, "threads is %d", threads);
    if (pb.table_on_device) return host_table_needed(err);
    const int64_t acc_elems = pb.D + (pb.logits ? pb.LP : 0);
    if ((uint64_t)acc_elems > SIZE_MAX / acc_size(pb.dtype))
        return msda_fail(err, MSDA_ERR_OUT_OF_MEMORY, "D + L*P is too large for host scratch");
    const cpu_task proto = {.pb = &pb, .fwd = a, .scratch_bytes = (size_t)acc_elems * acc_size(pb.dtype)};
    return run_tasks(&proto, pb.N * pb.Lq * pb.M, threads, err);
}

msda_status msda_backward_cpu(const msda_backward_args *a, int threads, msda_error *err) {
    msda_problem pb;
    msda_status st = msda_check_backward(a, &pb, err);
    if (st != MSDA_OK) return st;
    if (threads < 0) return msda_fail(err, MSDA_ERR_BAD_ARGUMENT, "threads is %d", threads);
    if (pb.table_on_device) return host_table_needed(err);
    /* S*D and LP are each below 2^55 (validated): the sum cannot overflow. */
    const int64_t acc_elems = pb.S * pb.D + pb.D + (pb.logits ? 2 * pb.LP : 0);
    if ((uint64_t)acc_elems > SIZE_MAX / acc_size(pb.dtype))
        return msda_fail(err, MSDA_ERR_OUT_OF_MEMORY, "S*D is too large for host scratch");
    const cpu_task proto = {.pb = &pb, .bwd = a, .scratch_bytes = (size_t)acc_elems * acc_size(pb.dtype)};
    return run_tasks(&proto, pb.N * pb.M, threads, err);
}
