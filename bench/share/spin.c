/* bench/share/spin.c: a single-threaded CPU-bound spinner for the proportional-share benchmark.
 *
 *   spin [-a CPULIST] [-g CGROUP_PROCS] [-b CPU_MS:SLEEP_MS] [-w PID] SLOTFILE SLOT
 *
 * SLOTFILE is a file of 32-byte slots shared with the harness (mmap, MAP_SHARED); slot SLOT holds
 * { int64 pid, int64 iterations, int64 phase, int64 reserved }. The spinner writes its pid, then
 * spins forever, publishing its iteration count every 2^14 iterations, so the harness can read the
 * work done at any moment (also after a SIGKILL): iterations per CPU-second is the work check.
 *   -a LIST  set its CPU affinity to LIST ("1", "0-1", "0,1") before spinning (= `taskset -c LIST`)
 *   -g PATH  write its pid to PATH (a cgroup's cgroup.procs) before spinning
 *   -b C:S   the I/O test's process B: after each C ms of its own CPU time, sleep S ms (phase is
 *            1 while spinning, 2 while asleep)
 *   -w PID   exit when process PID (the harness) has exited: checked through a pidfd every ~16 ms
 *            of spinning, so a harness killed with SIGKILL leaves no spinner behind
 * Otherwise it never exits on its own; the harness kills it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "spin: %s: %s\n", what, strerror(errno));
    exit(2);
}

int main(int argc, char **argv)
{
    const char *cpus = NULL;
    int opt;
    const char *cg = NULL;
    long burst_ms = 0, sleep_ms = 0, watch = 0;
    while ((opt = getopt(argc, argv, "a:g:b:w:")) != -1) {
        switch (opt) {
        case 'a': cpus = optarg; break;
        case 'g': cg = optarg; break;
        case 'w': watch = atol(optarg); break;
        case 'b':
            if (sscanf(optarg, "%ld:%ld", &burst_ms, &sleep_ms) != 2 || burst_ms <= 0 || sleep_ms < 0) {
                fprintf(stderr, "spin: -b wants CPU_MS:SLEEP_MS\n");
                return 2;
            }
            break;
        default:
            fprintf(stderr, "usage: spin [-a CPULIST] [-g CGROUP_PROCS] [-b CPU_MS:SLEEP_MS] [-w PID] SLOTFILE SLOT\n");
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "usage: spin [-a CPULIST] [-g CGROUP_PROCS] [-b CPU_MS:SLEEP_MS] [-w PID] SLOTFILE SLOT\n");
        return 2;
    }
    long slot = atol(argv[optind + 1]);
    int fd = open(argv[optind], O_RDWR);
    if (fd < 0) die(argv[optind]);
    off_t len = lseek(fd, 0, SEEK_END);
    if (slot < 0 || (slot + 1) * 32 > len) {
        fprintf(stderr, "spin: slot %ld outside %s (%ld bytes)\n", slot, argv[optind], (long)len);
        return 2;
    }
    volatile int64_t *s = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (s == MAP_FAILED) die("mmap");
    close(fd);
    s += slot * 4;
    if (cpus) {
        cpu_set_t set;
        CPU_ZERO(&set);
        const char *p = cpus;
        while (*p) {
            char *end;
            long a = strtol(p, &end, 10), b = a;
            if (end == p || a < 0 || a >= CPU_SETSIZE) {
                fprintf(stderr, "spin: bad CPU list %s\n", cpus);
                return 2;
            }
            p = end;
            if (*p == '-') {
                b = strtol(p + 1, &end, 10);
                if (end == p + 1 || b < a || b >= CPU_SETSIZE) {
                    fprintf(stderr, "spin: bad CPU list %s\n", cpus);
                    return 2;
                }
                p = end;
            }
            for (long c = a; c <= b; c++)
                CPU_SET(c, &set);
            if (*p == ',')
                p++;
        }
        if (sched_setaffinity(0, sizeof set, &set) != 0) die("sched_setaffinity");
    }
    if (cg) {
        FILE *f = fopen(cg, "w");
        if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) die(cg);
    }
    int wfd = -1;
    if (watch > 0) {
        wfd = (int)syscall(SYS_pidfd_open, (pid_t)watch, 0);
        if (wfd < 0) die("pidfd_open of the watched pid");
    }
    s[1] = 0;
    s[2] = 1;
    s[0] = getpid();

    volatile uint64_t x = 1;
    uint64_t iters = 0;
    unsigned batches = 0;
    int64_t burst_ns = burst_ms * 1000000LL, next = burst_ns ? cpu_ns() + burst_ns : 0;
    for (;;) {
        for (int i = 0; i < (1 << 14); i++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        iters += 1 << 14;
        s[1] = (int64_t)iters;
        if (wfd >= 0 && (++batches & 1023) == 0) {
            struct pollfd p = { .fd = wfd, .events = POLLIN };
            if (poll(&p, 1, 0) > 0)
                return 0; /* the harness is gone */
        }
        if (burst_ns && cpu_ns() >= next) {
            struct timespec ts = { sleep_ms / 1000, (sleep_ms % 1000) * 1000000L };
            s[2] = 2;
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
            if (wfd >= 0) {
                struct pollfd p = { .fd = wfd, .events = POLLIN };
                if (poll(&p, 1, 0) > 0)
                    return 0;
            }
            s[2] = 1;
            next = cpu_ns() + burst_ns;
        }
    }
}
