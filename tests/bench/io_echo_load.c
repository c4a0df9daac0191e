/*
** io_echo_load.c -- the load generator of the TCP echo benchmarks (io_bench.py,
** io_python.py, io_lua.py).
**
**   io_echo_load PORT CONNS MSG_BYTES WARMUP_S MEASURE_S SERVER_PID
**   io_echo_load --hold PORT CONNS        (io_rss: connect, then wait for stdin EOF)
**
** Opens CONNS TCP connections to 127.0.0.1:PORT (TCP_NODELAY, non-blocking) and
** drives them from one epoll loop (level-triggered): each connection sends a
** message of MSG_BYTES, reads until all MSG_BYTES came back (checking the first
** and last byte of each message), counts one request and sends again.  The
** warm-up begins once every connection has had its first echo (a server that
** accepts one connection per loop round, as copas 1.x does, takes seconds to
** take 1,000 in, and a window before that would measure the accepting); if
** that takes more than SETTLE_MAX_S the run fails.  After WARMUP_S seconds
** more it reads the server's CPU time, resets the count, runs MEASURE_S
** seconds more and reads it again; it prints one line
**
**   requests R seconds S server_cpu_s C load_cpu_s L clock K settle_s T
**
** T: the seconds from the last connect to the last first echo.
**
** The server's CPU is what getrusage(RUSAGE_SELF) would say in the server,
** utime + stime (every thread, the loopback softirq run in the server's
** syscalls included), read here at the edges of the window so that the
** warm-up, the connects and the teardown are left out: the kernel scales utime
** and stime so that their sum is the threads' sum_exec_runtime, which
** /proc/PID/task/TID/schedstat gives in ns; without schedstats it reads
** /proc/PID/stat's utime + stime, in clock ticks (10 ms).  The last field of
** the line says which ("clock schedstat" or "clock stat").
**
** --hold: opens CONNS connections, prints "connected", and waits until its
** stdin is closed (the client side of io_bench.py's rss and io_python.py's
** idle sections, so that the server's process holds only its own ends).
*/
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    size_t sent, got;     /* of the message under way */
    unsigned char tag;    /* what this message's bytes start and end with */
    unsigned char echoed; /* 1 once a whole message came back */
};

/* How long every connection may take to get its first echo. */
#define SETTLE_MAX_S 60.0

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void raise_nofile(rlim_t want)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        die("getrlimit");
    if (r.rlim_cur >= want)
        return;
    r.rlim_cur = want <= r.rlim_max ? want : r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur < want) {
        fprintf(stderr, "io_echo_load: RLIMIT_NOFILE hard limit %lu < %lu\n",
                (unsigned long)r.rlim_max, (unsigned long)want);
        exit(1);
    }
}

static int connect_one(int port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* A blocking connect, one at a time: a server's backlog never overflows. */
    while (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        if (errno != EINTR)
            die("connect");
    return fd;
}

/* utime + stime of pid, in seconds, from /proc/PID/stat (clock ticks). */
static double proc_stat_cpu_s(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        die(path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* After the name: state (field 3) ... utime (14), stime (15). */
    if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                            &ut, &st) != 2) {
        fprintf(stderr, "io_echo_load: cannot parse %s\n", path);
        exit(1);
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The same sum in ns: sum_exec_runtime (the first field of schedstat) of each
** thread of pid, which the kernel scales utime and stime to; -1 without
** schedstats. */
static double proc_sched_cpu_s(long pid)
{
    char path[320];
    snprintf(path, sizeof path, "/proc/%ld/task", pid);
    DIR *d = opendir(path);
    struct dirent *e;
    double sum = 0;
    if (d == NULL)
        return -1;
    while ((e = readdir(d)) != NULL) {
        unsigned long long ns;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%ld/task/%s/schedstat", pid, e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;   /* a thread that just ended */
        if (fscanf(f, "%llu", &ns) == 1)
            sum += (double)ns * 1e-9;
        else
            sum = -1e30;
        fclose(f);
    }
    closedir(d);
    return sum >= 0 ? sum : -1;
}

static int use_stat;

static double proc_cpu_s(long pid)
{
    double s = use_stat ? -1 : proc_sched_cpu_s(pid);
    if (s >= 0)
        return s;
    use_stat = 1;
    return proc_stat_cpu_s(pid);
}

static double self_cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) * 1e-6;
}

static int hold(int port, int n)
{
    raise_nofile((rlim_t)n + 64);
    int *fds = malloc(sizeof *fds * (size_t)n);
    if (fds == NULL)
        die("malloc");
    for (int i = 0; i < n; i++)
        fds[i] = connect_one(port);
    printf("connected\n");
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0) {
    }
    for (int i = 0; i < n; i++)
        close(fds[i]);
    free(fds);
    return 0;
}

/* Sends what is left of c's message; 1 when all of it is out. */
static int push(struct conn *c, const unsigned char *msg, size_t size)
{
    while (c->sent < size) {
        ssize_t k = send(c->fd, msg + c->sent, size - c->sent, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EAGAIN)
                return 0;
            die("send");
        }
        c->sent += (size_t)k;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--hold") == 0)
        return hold(atoi(argv[2]), atoi(argv[3]));
    if (argc != 7) {
        fprintf(stderr, "usage: io_echo_load PORT CONNS MSG_BYTES WARMUP_S MEASURE_S SERVER_PID\n"
                        "       io_echo_load --hold PORT CONNS\n");
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[2]);
    size_t size = (size_t)atol(argv[3]);
    double warm = atof(argv[4]), span = atof(argv[5]);
    long server = atol(argv[6]);
    if (n <= 0 || size == 0)
        return 2;
    raise_nofile((rlim_t)n + 64);

    /* The message: byte i of message with tag t is (t + i) & 255, so that the
    ** first and the last byte say whether the right bytes came back. */
    unsigned char *msg[256];
    for (int t = 0; t < 256; t++) {
        msg[t] = malloc(size);
        if (msg[t] == NULL)
            die("malloc");
        for (size_t i = 0; i < size; i++)
            msg[t][i] = (unsigned char)(t + i);
    }
    unsigned char *buf = malloc(size);
    struct conn *cs = calloc((size_t)n, sizeof *cs);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (buf == NULL || cs == NULL || ep < 0)
        die("setup");
    for (int i = 0; i < n; i++) {
        cs[i].fd = connect_one(port);
        cs[i].tag = (unsigned char)i;
    }
    for (int i = 0; i < n; i++) {
        struct conn *c = &cs[i];
        int fl = fcntl(c->fd, F_GETFL);
        if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0)
            die("fcntl");
        struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) != 0)
            die("epoll_ctl");
        if (!push(c, msg[c->tag], size)) {
            e.events = EPOLLIN | EPOLLOUT;
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
        }
    }

    struct epoll_event ev[256];
    long requests = 0;
    int silent = n;   /* connections that have not had their first echo */
    double t_conn = now_s(), t0 = 0, t_start = 0, cpu0 = 0, load0 = 0;
    int measuring = 0;
    for (;;) {
        double t = now_s();
        if (silent > 0) {
            if (t - t_conn >= SETTLE_MAX_S) {
                fprintf(stderr, "io_echo_load: %d of %d connections had no echo in %.0f s\n",
                        silent, n, SETTLE_MAX_S);
                return 1;
            }
        } else if (!measuring && t - t0 >= warm) {
            measuring = 1;
            cpu0 = proc_cpu_s(server);
            load0 = self_cpu_s();
            t_start = now_s();
            requests = 0;
        } else if (measuring && t - t_start >= span) {
            double cpu1 = proc_cpu_s(server), t1 = now_s();
            printf("requests %ld seconds %.4f server_cpu_s %.6f load_cpu_s %.4f clock %s "
                   "settle_s %.3f\n", requests, t1 - t_start, cpu1 - cpu0,
                   self_cpu_s() - load0, use_stat ? "stat" : "schedstat", t0 - t_conn);
            break;
        }
        int k = epoll_wait(ep, ev, 256, 100);
        if (k < 0 && errno != EINTR)
            die("epoll_wait");
        for (int j = 0; j < k; j++) {
            struct conn *c = ev[j].data.ptr;
            if (ev[j].events & EPOLLOUT) {
                if (push(c, msg[c->tag], size)) {
                    struct epoll_event e = { .events = EPOLLIN, .data.ptr = c };
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
                }
            }
            if (!(ev[j].events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
                continue;
            ssize_t r = recv(c->fd, buf, size - c->got, 0);
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r <= 0) {
                fprintf(stderr, "io_echo_load: the server closed a connection (%s)\n",
                        r < 0 ? strerror(errno) : "EOF");
                return 1;
            }
            if (c->got == 0 && buf[0] != msg[c->tag][0]) {
                fprintf(stderr, "io_echo_load: wrong bytes came back\n");
                return 1;
            }
            c->got += (size_t)r;
            if (c->got < size)
                continue;
            if (c->got > size || buf[r - 1] != msg[c->tag][size - 1] || c->sent != size) {
                fprintf(stderr, "io_echo_load: wrong bytes came back\n");
                return 1;
            }
            requests++;
            if (!c->echoed) {
                c->echoed = 1;
                if (--silent == 0)
                    t0 = now_s();
            }
            c->tag++;
            c->sent = c->got = 0;
            if (!push(c, msg[c->tag], size)) {
                struct epoll_event e = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
            }
        }
    }
    for (int i = 0; i < n; i++)
        close(cs[i].fd);
    return 0;
}
