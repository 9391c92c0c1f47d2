/* counter_bench.c -- increments per second of one shared atomic counter vs
 * per-thread shards padded to 128 B vs unpadded adjacent shards (8 B apart),
 * with relaxed or seq_cst fetch_add.  Part of concur (``concur bench counter``).
 *
 * Usage: counter_bench MODE ORDER THREADS MILLISECONDS
 *   MODE   shared | padded | adjacent
 *   ORDER  relaxed | seq_cst
 * Prints one line:  mode order threads ops seconds ops_per_s ns_per_op_per_thread
 * and exits 1 if the counted total disagrees with the increments made
 * (a lost update would be a bug in this program, not a measurement).
 *
 * Each thread is pinned to CPU (index % ncpu) when the platform allows it, so
 * with THREADS <= cores every thread runs on its own core.  Threads spin on a
 * start flag, then increment until the main thread raises the stop flag.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAD 128
#define MAX_THREADS 256
#define BATCH 256

struct padded { _Alignas(PAD) _Atomic uint64_t v; char pad[PAD - sizeof(uint64_t)]; };

static _Alignas(PAD) _Atomic uint64_t shared_counter;
static struct padded padded_shards[MAX_THREADS];
static _Alignas(PAD) _Atomic uint64_t adjacent_shards[MAX_THREADS];
static _Alignas(PAD) atomic_int start_flag;
static _Alignas(PAD) atomic_int stop_flag;

static int mode;      /* 0 shared, 1 padded, 2 adjacent */
static int seq_cst;   /* 0 relaxed, 1 seq_cst */

struct arg { int index; uint64_t ops; };

static void pin(int index) {
#ifdef __linux__
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(index % n), &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort */
#else
    (void)index;
#endif
}

static void *worker(void *p) {
    struct arg *a = p;
    _Atomic uint64_t *target = mode == 0 ? &shared_counter
                             : mode == 1 ? &padded_shards[a->index].v
                                         : &adjacent_shards[a->index];
    memory_order order = seq_cst ? memory_order_seq_cst : memory_order_relaxed;
    uint64_t ops = 0;
    pin(a->index);
    while (!atomic_load_explicit(&start_flag, memory_order_acquire)) { }
    /* one batch at least, whenever the thread first runs: on a loaded machine a thread may first
       get a core after the main thread has raised stop_flag, and a run that counted nothing
       would measure nothing (the exact-count check needs increments to check) */
    do {
        for (int i = 0; i < BATCH; i++) atomic_fetch_add_explicit(target, 1, order);
        ops += BATCH;
    } while (!atomic_load_explicit(&stop_flag, memory_order_relaxed));
    a->ops = ops;
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s shared|padded|adjacent relaxed|seq_cst THREADS MILLISECONDS\n", argv[0]);
        return 2;
    }
    if (!strcmp(argv[1], "shared")) mode = 0;
    else if (!strcmp(argv[1], "padded")) mode = 1;
    else if (!strcmp(argv[1], "adjacent")) mode = 2;
    else { fprintf(stderr, "unknown mode %s\n", argv[1]); return 2; }
    if (!strcmp(argv[2], "relaxed")) seq_cst = 0;
    else if (!strcmp(argv[2], "seq_cst")) seq_cst = 1;
    else { fprintf(stderr, "unknown order %s\n", argv[2]); return 2; }
    int threads = atoi(argv[3]);
    int ms = atoi(argv[4]);
    if (threads < 1 || threads > MAX_THREADS || ms < 1) {
        fprintf(stderr, "THREADS must be 1..%d and MILLISECONDS >= 1\n", MAX_THREADS);
        return 2;
    }
    pthread_t tid[MAX_THREADS];
    struct arg args[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        args[i].index = i;
        args[i].ops = 0;
        if (pthread_create(&tid[i], NULL, worker, &args[i])) { perror("pthread_create"); return 2; }
    }
    struct timespec pause = { ms / 1000, (long)(ms % 1000) * 1000000L };
    double t0 = now();
    atomic_store_explicit(&start_flag, 1, memory_order_release);
    nanosleep(&pause, NULL);
    atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
    uint64_t total = 0;
    for (int i = 0; i < threads; i++) { pthread_join(tid[i], NULL); total += args[i].ops; }
    double secs = now() - t0;
    uint64_t counted = 0;
    if (mode == 0) counted = atomic_load(&shared_counter);
    else for (int i = 0; i < threads; i++)
        counted += mode == 1 ? atomic_load(&padded_shards[i].v) : atomic_load(&adjacent_shards[i]);
    printf("%s %s %d %llu %.6f %.0f %.3f\n", argv[1], argv[2], threads,
           (unsigned long long)total, secs, total / secs, secs * 1e9 * threads / (double)total);
    if (counted != total) {
        fprintf(stderr, "lost updates: counted %llu, made %llu\n",
                (unsigned long long)counted, (unsigned long long)total);
        return 1;
    }
    return 0;
}
