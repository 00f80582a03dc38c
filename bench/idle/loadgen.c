/* bench/idle/loadgen.c: the thesis's load generator (Eggert 2004, T§7.1; spec idletime.md §7) for
 * the idle benchmark, and the servers it talks to.
 *
 *   loadgen fg   KIND TARGET -i INTENSITY -s START_NS -d SECONDS -o RECORDS [options]
 *   loadgen bg   KIND TARGET -s START_NS -d SECONDS -o RECORDS [options]
 *   loadgen sink PORT
 *   loadgen calibrate WORK_US            prints the spin iterations of WORK_US of CPU
 *
 * KIND and TARGET: `disk DEVICE` (random 4 KiB reads with O_DIRECT at 4 KiB-aligned offsets),
 * `net HOST:PORT` (a TCP request of -b bytes to a sink, which answers one byte), `udp HOST:PORT`
 * (the same -b bytes as datagrams to the sink's UDP port, which answers one small datagram once all
 * arrived; below), `cpu ITERATIONS` (a request is a spin of that many iterations, see `calibrate`).
 *
 * A UDP request of B bytes is n = ceil(B / 1472) datagrams of (almost) equal size, each at most
 * 1472 bytes of payload (an Ethernet MTU less the IPv4 and UDP headers: no fragmentation), each
 * starting with { u32 seq, u16 index, u16 n }; the sink answers { u32 seq, u16 n, u16 flags } once
 * it has all n. One request is outstanding, as with TCP. A request not answered within 200 ms (well
 * above the rig's round trip) is sent again whole; the sink keeps what it got and fills the gaps, and
 * answers a request it had complete already again, with flags = 1, when that resend's last
 * datagram comes (the first answer was lost or late). A request still unanswered 2 s past the end
 * is given up: the flow exits without recording it, so a lost datagram never hangs a flow.
 *
 * fg runs the thesis's cycle on absolute deadlines (the thesis's relative sleeps drifted and leaked
 * bg at p = 100-120 ms): cycle k starts at START + k*cycle; fg issues closed-loop requests, one
 * outstanding, while now < cycle start + INTENSITY*cycle, then sleeps until the next cycle start
 * (clock_nanosleep TIMER_ABSTIME). bg is greedy: one request outstanding, back to back. Both start
 * at START_NS (CLOCK_MONOTONIC, shared with the harness) and stop issuing at START + SECONDS.
 *
 * RECORDS is a file mapped MAP_SHARED (put it on /dev/shm): a 32-byte header { u64 magic, u64 count,
 * u64 resends, u64 lost } then one { u64 start_ns, u64 end_ns } per completed request,
 * CLOCK_MONOTONIC. The count is published after each record, so the harness can read everything
 * completed even after a SIGKILL (and a bg held frozen at the end still leaves its records).
 * resends (udp) counts the requests sent again after 200 ms without an answer, each time; lost, the
 * completed requests among them whose datagrams the sink lacked (answered without flags = 1: a
 * datagram was lost, or the first answer came after the resend); both 0 for the other kinds.
 *
 * Options: -c CYCLE_MS (100), -b BYTES (request size: disk 4096, net and udp 16384), -r SEED,
 * -n CAPACITY (records, default 1<<21), -a CPU (pin to one CPU, = taskset -c CPU), -x N (udp, for
 * the self-test: leave out every Nth datagram of a request's first sending, a loss on purpose).
 *
 *   loadgen sink PORT [N]   serves TCP and UDP on PORT; with N, leaves out every Nth first answer
 *                           to a UDP request (the self-test's lost answer)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x32656c6469746361ULL /* "actidle2" */
#define HEADER_WORDS 4                /* magic, count, resends, lost */

static void die(const char *what) {
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(2);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ULL), .tv_nsec = (long)(t % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* ---- records ---------------------------------------------------------------------------- */

struct records {
    volatile uint64_t *hdr; /* magic, count, resends, lost */
    uint64_t *rec;
    uint64_t cap;
};

static struct records open_records(const char *path, uint64_t cap) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        die(path);
    size_t size = 8 * HEADER_WORDS + cap * 16;
    if (ftruncate(fd, (off_t)size) != 0)
        die("ftruncate");
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        die("mmap");
    close(fd);
    struct records r = {.hdr = p, .rec = (uint64_t *)((char *)p + 8 * HEADER_WORDS), .cap = cap};
    r.hdr[0] = MAGIC;
    for (int k = 1; k < HEADER_WORDS; k++)
        r.hdr[k] = 0;
    return r;
}

static void record(struct records *r, uint64_t start, uint64_t end) {
    uint64_t n = r->hdr[1];
    if (n >= r->cap)
        return; /* the harness sees count == capacity and reports it */
    r->rec[2 * n] = start;
    r->rec[2 * n + 1] = end;
    __atomic_store_n(&r->hdr[1], n + 1, __ATOMIC_RELEASE);
}

/* ---- requests ------------------------------------------------------------------------------ */

enum kind { DISK, NET, UDP, CPU };

struct target {
    enum kind kind;
    int fd;
    uint64_t blocks; /* disk: device size / request size */
    size_t size;     /* bytes per request */
    char *buf;
    uint64_t iters; /* cpu: spin iterations per request */
    uint64_t rng;
    /* udp */
    uint32_t seq;          /* the request outstanding */
    uint16_t n;            /* datagrams per request */
    uint64_t drop_every;   /* -x: leave out every Nth first-sent datagram (0: none) */
    uint64_t sent;         /* first-sent datagrams, for drop_every */
    uint64_t give_up;      /* CLOCK_MONOTONIC: stop waiting for an answer after this */
    volatile uint64_t *hdr; /* the records' header: resends, lost */
};

/* The UDP framing (the comment at the top). */
#define UDP_PAYLOAD 1472 /* 1500-byte MTU less 20 bytes of IPv4 and 8 of UDP */
#define UDP_MAX_N 1024   /* datagrams per request: up to 1.5 MB */
#define UDP_TIMEOUT_NS 200000000ULL
#define UDP_GIVE_UP_NS 2000000000ULL
#define UDP_REACK 1

struct udp_hdr {
    uint32_t seq;
    uint16_t idx, n;
};

struct udp_ack {
    uint32_t seq;
    uint16_t n, flags;
};

static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static volatile uint64_t sink_var;

static void spin(uint64_t iters) {
    uint64_t x = 1;
    for (uint64_t i = 0; i < iters; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink_var = x;
}

/* -t TOS: the TOS byte (IPv4) / traffic class (IPv6) of the net sender's socket, as a job that
 * marks its own packets does (4 = DSCP LE, RFC 8622); -1 leaves the kernel's. */
static int tos = -1;

static int connect_to(const char *hostport, int type) {
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || (size_t)(colon - hostport) >= sizeof host) {
        fprintf(stderr, "loadgen: net target must be HOST:PORT, got %s\n", hostport);
        exit(2);
    }
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = type}, *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "loadgen: %s: %s\n", hostport, gai_strerror(rc));
        exit(2);
    }
    int fd = socket(ai->ai_family, type, 0);
    if (fd < 0)
        die("socket");
    if (tos >= 0) {
        int v6 = ai->ai_family == AF_INET6;
        if (setsockopt(fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_TCLASS : IP_TOS, &tos, sizeof tos) != 0)
            die("setsockopt TOS");
    }
    /* The sink may still be starting: retry for up to 5 s. */
    for (int tries = 0; connect(fd, ai->ai_addr, ai->ai_addrlen) != 0; tries++) {
        if (tries >= 100)
            die(hostport);
        usleep(50000);
    }
    freeaddrinfo(ai);
    if (type == SOCK_DGRAM)
        return fd;
    int one = 1;
    /* One request is one write: no Nagle delay between the request and the next. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void write_all(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        buf += w;
        n -= (size_t)w;
    }
}

static int read_all(int fd, char *buf, size_t n) {
    while (n > 0) {
        ssize_t r = read(fd, buf, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        buf += r;
        n -= (size_t)r;
    }
    return 0;
}

/* One sending of request t->seq, whole; the first leaves out every drop_every-th datagram. */
static void udp_send(struct target *t, int first) {
    size_t each = t->size / t->n, extra = t->size % t->n;
    for (uint16_t k = 0; k < t->n; k++) {
        size_t len = each + (k < extra);
        if (first && t->drop_every && ++t->sent % t->drop_every == 0)
            continue;
        struct udp_hdr h = {.seq = t->seq, .idx = k, .n = t->n};
        memcpy(t->buf, &h, sizeof h);
        /* Errors are losses: ECONNREFUSED (a port unreachable for an earlier datagram, a sink
         * not up yet), ENOBUFS; the resend recovers. */
        while (send(t->fd, t->buf, len, 0) < 0 && errno == EINTR) {
        }
    }
}

/* 0 once the sink answered request t->seq, -1 if it gave up (past t->give_up). */
static int udp_request(struct target *t) {
    t->seq++;
    udp_send(t, 1);
    int resent = 0;
    uint64_t deadline = now_ns() + UDP_TIMEOUT_NS;
    for (;;) {
        struct udp_ack a;
        /* Look before every wait, so that an answer that came while the process was stopped
         * (tact's hold) is taken, not mistaken for a loss. */
        ssize_t r = recv(t->fd, &a, sizeof a, MSG_DONTWAIT);
        if (r == (ssize_t)sizeof a && a.seq == t->seq) {
            if (resent && !(a.flags & UDP_REACK))
                __atomic_fetch_add(&t->hdr[3], 1, __ATOMIC_RELAXED);
            return 0;
        }
        if (r >= 0 || errno == EINTR || errno == ECONNREFUSED)
            continue; /* a stale answer (an earlier request's re-answer), or an ICMP error */
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            die("recv");
        uint64_t now = now_ns();
        if (now >= t->give_up)
            return -1;
        if (now >= deadline) {
            udp_send(t, 0);
            resent = 1;
            __atomic_fetch_add(&t->hdr[2], 1, __ATOMIC_RELAXED);
            deadline = now + UDP_TIMEOUT_NS;
            continue;
        }
        struct pollfd p = {.fd = t->fd, .events = POLLIN};
        poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
    }
}

static int request(struct target *t) {
    switch (t->kind) {
    case DISK: {
        off_t off = (off_t)(xorshift(&t->rng) % t->blocks) * (off_t)t->size;
        ssize_t r;
        while ((r = pread(t->fd, t->buf, t->size, off)) < 0 && errno == EINTR) {
        }
        if (r != (ssize_t)t->size)
            die("pread");
        break;
    }
    case NET: {
        char ack;
        write_all(t->fd, t->buf, t->size);
        if (read_all(t->fd, &ack, 1) != 0)
            die("read (sink closed the connection)");
        break;
    }
    case UDP:
        return udp_request(t);
    case CPU:
        spin(t->iters);
        break;
    }
    return 0;
}

static struct target open_target(const char *kind, const char *arg, size_t size, uint64_t seed) {
    struct target t = {.fd = -1, .rng = seed ? seed : 88172645463325252ULL};
    if (strcmp(kind, "disk") == 0) {
        t.kind = DISK;
        t.size = size ? size : 4096;
        t.fd = open(arg, O_RDONLY | O_DIRECT);
        if (t.fd < 0)
            die(arg);
        off_t end = lseek(t.fd, 0, SEEK_END);
        if (end < (off_t)t.size)
            die("device too small");
        t.blocks = (uint64_t)end / t.size;
    } else if (strcmp(kind, "net") == 0 || strcmp(kind, "udp") == 0) {
        int udp = kind[0] == 'u';
        t.kind = udp ? UDP : NET;
        t.size = size ? size : 16384;
        if (udp) {
            t.n = (uint16_t)((t.size + UDP_PAYLOAD - 1) / UDP_PAYLOAD);
            if (t.size < sizeof(struct udp_hdr) * t.n || t.n > UDP_MAX_N) {
                fprintf(stderr, "loadgen: udp requests of %zu bytes: between 8 and %d\n", t.size,
                        UDP_PAYLOAD * UDP_MAX_N);
                exit(2);
            }
        }
        t.fd = connect_to(arg, udp ? SOCK_DGRAM : SOCK_STREAM);
    } else if (strcmp(kind, "cpu") == 0) {
        t.kind = CPU;
        t.iters = strtoull(arg, NULL, 10);
        if (t.iters == 0) {
            fprintf(stderr, "loadgen: cpu needs a positive iteration count, got %s\n", arg);
            exit(2);
        }
        return t;
    } else {
        fprintf(stderr, "loadgen: unknown kind %s (disk, net, udp, cpu)\n", kind);
        exit(2);
    }
    /* O_DIRECT needs an aligned buffer; the net payload is non-zero so nothing compresses it. */
    if (posix_memalign((void **)&t.buf, 4096, t.size) != 0)
        die("posix_memalign");
    memset(t.buf, 0x5a, t.size);
    return t;
}

/* ---- sink ------------------------------------------------------------------------------------ */

/* A TCP server, one forked child per connection. A request starts with its length (u32, host
 * order, counting those 4 bytes); the sink reads all of it, then answers one byte. */
static void serve(int c) {
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    if (!buf)
        die("malloc");
    for (;;) {
        uint32_t len;
        if (read_all(c, (char *)&len, 4) != 0)
            break;
        if (len < 4 || len > cap)
            break;
        if (read_all(c, buf, len - 4) != 0)
            break;
        char ack = 1;
        write_all(c, &ack, 1);
    }
    exit(0);
}

/* The UDP side: one process for every sender, a request's state per sender address (the last
 * UDP_PEERS senders; each point's flows are new sockets, so the least recently heard is
 * forgotten). drop_every > 0 leaves out every drop_every-th first answer (the self-test's loss). */
#define UDP_PEERS 64

struct udp_peer {
    struct sockaddr_in6 addr;
    uint64_t heard; /* a counter, for the least recently heard */
    uint32_t seq;
    uint16_t n, got;
    int done;
    uint8_t have[UDP_MAX_N];
};

static _Noreturn void serve_udp(int s, uint64_t drop_every) {
    static struct udp_peer peers[UDP_PEERS];
    static char buf[65536];
    uint64_t clock = 0, answers = 0;
    for (;;) {
        struct sockaddr_in6 from;
        socklen_t fl = sizeof from;
        ssize_t r = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            die("recvfrom");
        }
        struct udp_hdr h;
        if (r < (ssize_t)sizeof h)
            continue;
        memcpy(&h, buf, sizeof h);
        if (h.n == 0 || h.n > UDP_MAX_N || h.idx >= h.n)
            continue;
        struct udp_peer *p = NULL, *oldest = &peers[0];
        for (int k = 0; k < UDP_PEERS && !p; k++) {
            if (peers[k].heard && memcmp(&peers[k].addr, &from, sizeof from) == 0)
                p = &peers[k];
            else if (peers[k].heard < oldest->heard)
                oldest = &peers[k];
        }
        if (!p) {
            p = oldest;
            memset(p, 0, sizeof *p);
            p->addr = from;
        }
        p->heard = ++clock;
        if (h.seq != p->seq || p->n == 0) {
            if (p->n != 0 && (int32_t)(h.seq - p->seq) < 0)
                continue; /* an earlier request's datagram, late */
            p->seq = h.seq;
            p->n = h.n;
            p->got = 0;
            p->done = 0;
            memset(p->have, 0, h.n);
        }
        struct udp_ack a = {.seq = h.seq, .n = h.n, .flags = 0};
        if (p->done) {
            /* Complete already: the answer was lost or late; answer the resend once, at its end. */
            if (h.idx != h.n - 1)
                continue;
            a.flags = UDP_REACK;
        } else {
            if (!p->have[h.idx]) {
                p->have[h.idx] = 1;
                p->got++;
            }
            if (p->got < p->n)
                continue;
            p->done = 1;
            if (drop_every && ++answers % drop_every == 0)
                continue;
        }
        while (sendto(s, &a, sizeof a, 0, (struct sockaddr *)&from, fl) < 0 && errno == EINTR) {
        }
    }
}

static int listen_on(const char *port, int type) {
    int s = socket(AF_INET6, type, 0);
    if (s < 0)
        die("socket");
    int one = 1, zero = 0;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)atoi(port)),
                             .sin6_addr = in6addr_any};
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0)
        die("bind");
    return s;
}

static _Noreturn void run_sink(const char *port, uint64_t drop_every) {
    /* Started by the harness (through `ip netns exec`, which execs): die with it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGCHLD, SIG_IGN); /* children are reaped by the kernel */
    int u = listen_on(port, SOCK_DGRAM);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        serve_udp(u, drop_every);
    }
    close(u);
    int one = 1;
    int s = listen_on(port, SOCK_STREAM);
    if (listen(s, 64) != 0)
        die("listen");
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            die("accept");
        }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pid_t pid = fork();
        if (pid == 0) {
            close(s);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            serve(c);
        }
        close(c);
    }
}

/* ---- main ------------------------------------------------------------------------------------ */

static void usage(void) {
    fprintf(stderr, "usage: loadgen fg|bg disk DEVICE|net HOST:PORT|udp HOST:PORT|cpu ITERS -s START_NS -d SECONDS "
                    "-o RECORDS [-i INTENSITY] [-c CYCLE_MS] [-b BYTES] [-r SEED] [-n CAPACITY] [-a CPU] [-t TOS] "
                    "[-x N]\n"
                    "       loadgen sink PORT [N]\n"
                    "       loadgen calibrate WORK_US\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "sink") == 0)
        run_sink(argv[2], argc >= 4 ? strtoull(argv[3], NULL, 10) : 0);
    if (argc >= 3 && strcmp(argv[1], "calibrate") == 0) {
        /* The best of several tries: the machine is shared, and the harness wants the work of an
         * uncontended CPU. */
        double us = atof(argv[2]);
        uint64_t probe = 1 << 22;
        double best = 1e30;
        for (int k = 0; k < 7; k++) {
            uint64_t t0 = now_ns();
            spin(probe);
            double dt = (double)(now_ns() - t0);
            if (dt < best)
                best = dt;
        }
        printf("%llu\n", (unsigned long long)((double)probe * us * 1000.0 / best));
        return 0;
    }
    if (argc < 4)
        usage();
    int fg = strcmp(argv[1], "fg") == 0;
    if (!fg && strcmp(argv[1], "bg") != 0)
        usage();
    const char *kind = argv[2], *arg = argv[3];
    double intensity = 1.0, seconds = 0, cycle_ms = 100;
    uint64_t start = 0, seed = fg ? 1 : 2, cap = 1 << 21;
    size_t size = 0;
    const char *out = NULL;
    int cpu = -1, opt;
    optind = 4;
    uint64_t drop_every = 0;
    while ((opt = getopt(argc, argv, "i:s:d:o:c:b:r:n:a:t:x:")) != -1) {
        switch (opt) {
        case 'i': intensity = atof(optarg); break;
        case 's': start = strtoull(optarg, NULL, 10); break;
        case 'd': seconds = atof(optarg); break;
        case 'o': out = optarg; break;
        case 'c': cycle_ms = atof(optarg); break;
        case 'b': size = (size_t)strtoull(optarg, NULL, 10); break;
        case 'r': seed = strtoull(optarg, NULL, 10); break;
        case 'n': cap = strtoull(optarg, NULL, 10); break;
        case 'a': cpu = atoi(optarg); break;
        case 't': tos = atoi(optarg); break;
        case 'x': drop_every = strtoull(optarg, NULL, 10); break;
        default: usage();
        }
    }
    if (!out || seconds <= 0 || intensity <= 0 || intensity > 1 || cycle_ms <= 0 || cap == 0)
        usage();
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            die("sched_setaffinity");
    }
    struct records rec = open_records(out, cap);
    struct target t = open_target(kind, arg, size, seed);
    if (t.kind == NET) /* the sink's framing: the request's length in its first 4 bytes */
        memcpy(t.buf, &(uint32_t){(uint32_t)t.size}, 4);
    if (start == 0)
        start = now_ns();
    uint64_t end = start + (uint64_t)(seconds * 1e9);
    t.drop_every = drop_every;
    t.give_up = end + UDP_GIVE_UP_NS;
    t.hdr = rec.hdr;
    uint64_t cycle = (uint64_t)(cycle_ms * 1e6), busy = (uint64_t)(intensity * (double)cycle);
    sleep_until(start);
    if (!fg) {
        for (uint64_t t0; (t0 = now_ns()) < end;) {
            if (request(&t) != 0)
                return 0;
            record(&rec, t0, now_ns());
        }
        return 0;
    }
    for (uint64_t c0 = start; c0 < end;) {
        uint64_t stop = c0 + busy < end ? c0 + busy : end;
        for (uint64_t t0; (t0 = now_ns()) < stop;) {
            if (request(&t) != 0)
                return 0;
            record(&rec, t0, now_ns());
        }
        /* The schedule is fixed: a request that overran into the next cycle delays that cycle's
         * start but not its end; cycles whose busy time has passed entirely are skipped. */
        uint64_t next = c0 + cycle;
        while (next + busy <= now_ns())
            next += cycle;
        sleep_until(next < end ? next : end);
        c0 = next;
    }
    return 0;
}
