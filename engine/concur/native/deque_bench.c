/* deque_bench.c -- why a work-stealing owner pops LIFO: cache locality and
 * space.  Part of concur (``concur bench deque``).
 *
 * Usage: deque_bench ORDER MEGABYTES LEAF_ELEMENTS
 *   ORDER  lifo | fifo
 * A divide-and-conquer job over an array of MEGABYTES of uint32: a task
 * (lo, hi) makes one pass over its range (as a partition step would), then
 * splits it in two child tasks until the range is at most LEAF_ELEMENTS.
 * The tasks go through one deque.  LIFO (what the owner of a Chase-Lev deque
 * does) runs a child right after its parent, while the parent's range is
 * still in cache; FIFO (breadth-first, what a thief sees) finishes each whole
 * level -- the whole array -- before the next, so every level streams from
 * memory once the array exceeds the caches.  The work done is identical.
 * Prints: order megabytes leaf tasks max_deque seconds checksum
 * Built by concur with -O2 -ftree-vectorize so the pass runs at memory speed
 * (scalar code would be compute-bound and hide the cache effect).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct task { size_t lo, hi; };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s lifo|fifo MEGABYTES LEAF_ELEMENTS\n", argv[0]);
        return 2;
    }
    int lifo;
    if (!strcmp(argv[1], "lifo")) lifo = 1;
    else if (!strcmp(argv[1], "fifo")) lifo = 0;
    else { fprintf(stderr, "unknown order %s\n", argv[1]); return 2; }
    long mb = atol(argv[2]);
    long leaf = atol(argv[3]);
    if (mb < 1 || leaf < 1) { fprintf(stderr, "MEGABYTES and LEAF_ELEMENTS must be >= 1\n"); return 2; }
    size_t n = (size_t)mb * 1024 * 1024 / sizeof(uint32_t);
    uint32_t *a = malloc(n * sizeof *a);
    if (!a) { perror("malloc"); return 2; }
    for (size_t i = 0; i < n; i++) a[i] = (uint32_t)i;

    /* The deque: a ring buffer large enough for the widest level. */
    size_t cap = 2;
    while (cap < 4 * (n / (size_t)leaf + 2)) cap <<= 1;
    struct task *q = malloc(cap * sizeof *q);
    if (!q) { perror("malloc"); return 2; }
    size_t top = 0, bottom = 0, max_len = 0, tasks = 0;
    uint64_t checksum = 0;

    double t0 = now();
    q[bottom++ & (cap - 1)] = (struct task){0, n};
    while (bottom > top) {
        struct task t = lifo ? q[--bottom & (cap - 1)] : q[top++ & (cap - 1)];
        tasks++;
        for (size_t i = t.lo; i < t.hi; i++) a[i] += 1u; /* one streaming pass */
        checksum += a[t.lo];
        if (t.hi - t.lo > (size_t)leaf) {
            size_t mid = t.lo + (t.hi - t.lo) / 2;
            /* push the right half first so LIFO runs the left half next */
            q[bottom++ & (cap - 1)] = (struct task){mid, t.hi};
            q[bottom++ & (cap - 1)] = (struct task){t.lo, mid};
            if (bottom - top > max_len) max_len = bottom - top;
        }
    }
    double secs = now() - t0;
    printf("%s %ld %ld %zu %zu %.6f %llu\n", argv[1], mb, leaf, tasks, max_len, secs,
           (unsigned long long)checksum);
    free(q);
    free(a);
    return 0;
}
