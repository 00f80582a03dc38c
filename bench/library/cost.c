/*
 * cost.c: what tact_testpoint() costs a C program (bench/library/cost.py builds and runs it).
 *
 *   cost fast N   N calls that are not due (the fast path), after the registering call;
 *                 prints "fast_ns <ns per call>"
 *   cost due N    N due testpoints, each after 5 ms of sleeping "work" (run it with
 *                 TACT_TESTPOINT=1ms so that every call is due); prints "due_ns <median> <p90>"
 *
 * The C interface reads its settings from the environment only (TACT_TESTPOINT, TACT_STATE_DIR,
 * TACT_DISABLE, TACT_NAME) and cannot shorten the bootstrap (100 testpoints): cost.py runs
 * "due 110" once to calibrate (the target is saved at exit), then times "due 80" in a second
 * run that loads the target and is regulated from its first due testpoint.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tact.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int check(int rc)
{
    if (rc != TACT_OK) {
        fprintf(stderr, "tact_testpoint: %s (%d)\n", tact_last_error(), rc);
        exit(1);
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "fast") != 0 && strcmp(argv[1], "due") != 0)) {
        fprintf(stderr, "usage: %s fast|due N\n", argv[0]);
        return 2;
    }
    long n = atol(argv[2]);
    if (n < 1) {
        fprintf(stderr, "N must be >= 1\n");
        return 2;
    }
    int64_t one = 1;
    /* The first call registers the thread (and takes the run token). */
    check(tact_testpoint(0, 1, &one));
    if (strcmp(argv[1], "fast") == 0) {
        volatile int64_t progress = 4096;
        int64_t m;
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            m = progress;
            if (tact_testpoint(0, 1, &m) != TACT_OK)
                check(-4);
        }
        double t1 = now_ns();
        printf("fast_ns %.2f\n", (t1 - t0) / (double)n);
        return 0;
    }
    double *took = calloc((size_t)n, sizeof *took);
    if (!took)
        return 1;
    struct timespec work = {0, 5 * 1000 * 1000};
    for (long i = 0; i < n; i++) {
        nanosleep(&work, NULL);
        double t0 = now_ns();
        check(tact_testpoint(0, 1, &one));
        took[i] = now_ns() - t0;
    }
    qsort(took, (size_t)n, sizeof *took, cmp_double);
    printf("due_ns %.1f %.1f\n", took[n / 2], took[n * 9 / 10]);
    free(took);
    return 0;
}
