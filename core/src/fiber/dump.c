/*
** dump.c -- what a run looks like now: px_sched_inspect hands over one record
** per live fiber (its number, name, state, wait, holders, fd, deadline, how
** long it waited, where it is), px_dump prints them as a table, and
** px_dump_signal makes a signal print every scheduler's.
**
** A signal handler may not look at a scheduler (its fibers change under it,
** and a lock it would take may be held by the interrupted code), so the
** handler only writes a byte to a pipe.  A thread of ours waits on that pipe
** and posts a dump to every scheduler, which writes it on its own thread at
** its next turn of the loop (a post ends a wait in the kernel at once).
*/
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "fiber/fiber.h"

#define WHERE_MAX 4096   /* bytes of a hosted fiber's description */

/* -- inspection ----------------------------------------------------------- */

static int public_state(int state)
{
    switch (state) {
    case PX__FIBER_READY: return PX_FIBER_READY;
    case PX__FIBER_RUNNING: return PX_FIBER_RUNNING;
    case PX__FIBER_PARKED: return PX_FIBER_PARKED;
    default: return PX_FIBER_ENDED;
    }
}

/* The wait of parked fiber f, into i. */
static void describe_wait(const px_fiber *f, int64_t now, px_fiber_info *i)
{
    const px_park_info *p = &f->park;
    i->reason = p->reason ? p->reason : "?";
    i->kind = p->kind;
    i->object = p->object;
    px_object_name(p->object, i->object_name, sizeof i->object_name);
    if (p->holders && p->object) {
        size_t n = p->holders(p->object, i->holders, PX_INFO_HOLDERS);
        i->nholders = n > PX_INFO_HOLDERS ? PX_INFO_HOLDERS : n;
    }
    if (f->wait.op == PX__POLL_OP) {
        i->fd = (int)(uint32_t)f->wait.n;
        i->events = (unsigned)(f->wait.n >> 32);
    }
    if (px__tset_contains(&f->timer))
        i->deadline = f->timer.deadline;
    /* park_ms counts milliseconds since clock_t0 in 32 bits, which wrap in 49.7
    ** days: the wait is measured back from now, in the same 32 bits. */
    int64_t now_ms = (now - f->s->clock_t0) / 1000000;
    uint32_t ago_ms = (uint32_t)now_ms - f->park_ms;
    int64_t since = f->s->clock_t0 + (now_ms - (int64_t)ago_ms) * 1000000;
    i->parked_ns = now > since ? now - since : 0;
}

/* A function pointer as the address dladdr looks up and %p prints: POSIX lets
** the two convert (dlsym's rule), C11 leaves it to the platform. */
static void *address_of(px_fiber_fn fn)
{
    void *addr;
    memcpy(&addr, &fn, sizeof addr);
    return addr;
}

static void describe_where(px_sched *s, const px_fiber *f, char *buf, px_fiber_info *i)
{
    if (f->hosted) {
        buf[0] = '\0';
        if (s->opts.describe)
            s->opts.describe(s->opts.describe_ctx, f->id, f->host_ctx, buf, WHERE_MAX);
        buf[WHERE_MAX - 1] = '\0';
        i->where = buf;
        return;
    }
    Dl_info dl;
    i->fn = f->fn;
    void *addr = address_of(f->fn);
    if (dladdr(addr, &dl) && dl.dli_sname && dl.dli_saddr == addr)
        i->where = dl.dli_sname;
}

/* The calling thread's running scheduler, or `s` when it is that one. */
static int check(px_sched **s)
{
    px_sched *here = px__sched_here();
    if (*s == NULL)
        *s = here;
    if (*s == NULL)
        return PX_EINVAL;
    if (px__sched_forked(*s))
        return PX_EFORKED;
    if (*s != here) {
        pthread_mutex_lock(&(*s)->lock);
        int other = (*s)->running || ((*s)->bound && !pthread_equal((*s)->thread, pthread_self()));
        pthread_mutex_unlock(&(*s)->lock);
        if (other)
            return PX_ETHREAD;
    }
    return 0;
}

/* The time of s's clock, which its parks were stamped with: a virtual one is
** s's own, on its thread between runs too. */
static int64_t sched_now(const px_sched *s)
{
    return s->opts.clock == PX_CLOCK_VIRTUAL ? s->vnow : px__clock_real();
}

int px_sched_inspect(px_sched *s, int (*visit)(void *ctx, const px_fiber_info *info), void *ctx)
{
    int r = check(&s);
    if (r != 0)
        return r;
    if (visit == NULL)
        return PX_EINVAL;
    char *buf = malloc(WHERE_MAX);
    if (buf == NULL)
        return PX_ENOMEM;
    int64_t now = sched_now(s);
    int n = 0;
    for (px__list *l = s->all.next; l != &s->all; l = l->next) {
        px_fiber *f = px__fiber_of_all(l);
        if (f->state == PX__FIBER_DONE)
            continue;
        px_fiber_info i = { .id = f->id, .number = px__fiber_number(f->id),
                            .name = px__extra_name(f), .state = public_state(f->state),
                            .hosted = f->hosted, .fd = -1, .deadline = INT64_MAX };
        if (f->state == PX__FIBER_PARKED)
            describe_wait(f, now, &i);
        describe_where(s, f, buf, &i);
        n++;
        if (visit(ctx, &i) != 0 || n == INT32_MAX)
            break;
    }
    free(buf);
    return n;
}

/* -- the table ------------------------------------------------------------ */

typedef struct dump {
    FILE *out;
    px_sched *s;
    int64_t now;
} dump;

static void print_fiber(FILE *out, px_sched *s, uint64_t id, const char *name)
{
    fprintf(out, "fiber %" PRIu64, px__fiber_number(id));
    if (name == NULL)
        name = px__extra_name_of(s, id);
    if (name)
        fprintf(out, " \"%s\"", name);
}

static void print_seconds(FILE *out, int64_t ns)
{
    int64_t a = ns < 0 ? -ns : ns;
    fprintf(out, "%s%" PRId64 ".%03d s", ns < 0 ? "-" : "", a / 1000000000,
            (int)(a / 1000000 % 1000));
}

static void print_wait(const dump *d, const px_fiber_info *i)
{
    FILE *out = d->out;
    fprintf(out, " for ");
    print_seconds(out, i->parked_ns);
    fprintf(out, " on \"%s\"", i->reason);
    if (i->fd >= 0)
        fprintf(out, ", fd %d%s%s", i->fd, i->events & PX_READABLE ? " readable" : "",
                i->events & PX_WRITABLE ? " writable" : "");
    else if (i->object) {
        fprintf(out, ", waits on %s", i->kind ? i->kind : "object");
        if (i->object_name[0])
            fprintf(out, " \"%s\"", i->object_name);
        fprintf(out, "@%p", i->object);
    }
    for (size_t h = 0; h < i->nholders; h++) {
        fprintf(out, "%s", h ? ", " : " held by ");
        print_fiber(out, d->s, i->holders[h], NULL);
    }
    if (i->deadline != INT64_MAX) {
        fprintf(out, ", deadline in ");
        print_seconds(out, i->deadline - d->now);
    }
}

/* Each line of text, indented under its fiber's line (a tab that starts a
** line, as in a Lua traceback, is two spaces more). */
static void print_indented(FILE *out, const char *text)
{
    while (*text) {
        int tabs = 0;
        while (*text == '\t')
            text++, tabs++;
        size_t len = strcspn(text, "\n");
        fprintf(out, "      %*s%.*s\n", 2 * tabs, "", (int)len, text);
        text += len + (text[len] == '\n');
    }
}

static int print_info(void *ctx, const px_fiber_info *i)
{
    static const char *const states[] = { "ready", "running", "parked", "ended" };
    const dump *d = ctx;
    fprintf(d->out, "  ");
    print_fiber(d->out, d->s, i->id, i->name);
    fprintf(d->out, ": %s", states[i->state]);
    if (i->state == PX_FIBER_PARKED)
        print_wait(d, i);
    fprintf(d->out, "\n");
    if (i->where && i->where[0])
        print_indented(d->out, i->where);
    else if (i->fn)
        fprintf(d->out, "      in the function at %p\n", address_of(i->fn));
    return 0;
}

int px_dump(px_sched *s, FILE *out)
{
    int r = check(&s);
    if (r != 0)
        return r;
    dump d = { out ? out : stderr, s, sched_now(s) };
    flockfile(d.out);   /* one table at a time: every scheduler dumps on a signal */
    fprintf(d.out, "parataxis: the fibers of scheduler %" PRIu64 "%s:\n", s->serial,
            s->opts.clock == PX_CLOCK_VIRTUAL ? " (virtual clock)" : "");
    r = px_sched_inspect(s, print_info, &d);
    fprintf(d.out, "  (%d live)\n", r < 0 ? 0 : r);
    fflush(d.out);
    funlockfile(d.out);
    return r;
}

/* -- on a signal ---------------------------------------------------------- */

static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int sig_pipe[2] = { -1, -1 };
static int sig_thread;           /* the reader runs (reset in a fork's child) */
static int sig_no;               /* the signal we handle, 0: none */
static struct sigaction sig_old;  /* its handler before ours */
static pthread_once_t sig_env_once = PTHREAD_ONCE_INIT;

static void on_signal(int signo)
{
    (void)signo;
    int saved = errno;
    ssize_t w = write(sig_pipe[1], "d", 1);   /* a full pipe has a dump coming anyway */
    (void)w;
    errno = saved;
}

/* A dump posted to a scheduler: written on its thread (or dropped, status
** PX_ECANCELED, when it is freed first). */
static void dump_call(void *arg, int status)
{
    if (status == 0)
        px_dump(arg, stderr);
}

static void post_dump(px_sched *s, void *ctx)
{
    (void)ctx;
    px__item it = { .kind = PX__FIBER_ITEM_CALL, .hfn = dump_call, .arg = s };
    px__sched_inbox_post(s, &it);
}

static void *reader(void *arg)
{
    (void)arg;
    char b[64];
    for (;;) {
        ssize_t n = read(sig_pipe[0], b, sizeof b);
        if (n > 0)
            px__sched_each(post_dump, NULL);
        else if (n == 0 || errno != EINTR)
            return NULL;
    }
}

/* The pipe, its write end never blocking (the handler's); 0 or PX_ENOMEM. */
static int open_pipe(void)
{
    if (pipe2(sig_pipe, O_CLOEXEC) != 0)
        return PX_ENOMEM;
    fcntl(sig_pipe[1], F_SETFL, O_NONBLOCK);
    return 0;
}

/* A fork waits for sig_lock, so that the child finds the pipe whole. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&sig_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&sig_lock);
}

/* The reader stayed in the parent, and the pipe is the parent's too: the
** child's handler writes to a pipe of its own, which a reader of its own
** reads once the child makes a scheduler (px__dump_read_env). */
static void forked_child(void)
{
    sig_thread = 0;
    if (sig_pipe[0] >= 0) {
        close(sig_pipe[0]);
        close(sig_pipe[1]);
        sig_pipe[0] = sig_pipe[1] = -1;
        if (sig_no != 0)
            open_pipe();   /* none: the handler's write fails, harmless */
    }
    pthread_mutex_unlock(&sig_lock);
}

/* The pipe and its reader, made once (again in a fork's child); 0 or PX_ENOMEM. */
static int start_reader(void)
{
    static int watching;
    if (!watching) {
        pthread_atfork(fork_prepare, fork_parent, forked_child);
        watching = 1;
    }
    if (sig_pipe[0] < 0 && open_pipe() != 0)
        return PX_ENOMEM;
    if (!sig_thread) {
        pthread_t t;
        pthread_attr_t a;
        sigset_t all, old;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);   /* signals go to the program's threads */
        int r = pthread_create(&t, &a, reader, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&a);
        if (r != 0)
            return PX_ENOMEM;
        sig_thread = 1;
    }
    return 0;
}

/* Makes on_signal signo's handler; 0, or -1 when signo cannot be caught. */
static int catch_signal(int signo, struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return sigaction(signo, &sa, old);
}

int px_dump_signal(int signo)
{
    if (signo < 0 || signo >= NSIG || signo == SIGKILL || signo == SIGSTOP)
        return PX_EINVAL;
    pthread_mutex_lock(&sig_lock);
    int r = signo ? start_reader() : 0;
    /* The new one first: a signal refused leaves the one we had in place. */
    struct sigaction old;
    memset(&old, 0, sizeof old);
    if (r == 0 && signo != 0 && catch_signal(signo, &old) != 0) {
        r = PX_EINVAL;
    } else if (r == 0 && signo != sig_no) {
        if (sig_no != 0)
            sigaction(sig_no, &sig_old, NULL);
        sig_old = old;   /* the same signal again keeps the handler it had before us */
        sig_no = signo;
    }
    pthread_mutex_unlock(&sig_lock);
    return r;
}

/* PARATAXIS_DUMP_SIGNAL: a number, or a name with or without its SIG. */
static int signal_named(const char *v)
{
    static const struct { const char *name; int no; } names[] = {
        { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "USR1", SIGUSR1 },
        { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "WINCH", SIGWINCH }, { "URG", SIGURG },
        { "PWR", SIGPWR }, { "TSTP", SIGTSTP },
    };
    char *end;
    long n = strtol(v, &end, 10);
    if (*v && *end == '\0')
        return n > 0 && n < NSIG ? (int)n : -1;
    if (strncmp(v, "SIG", 3) == 0)
        v += 3;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(v, names[i].name) == 0)
            return names[i].no;
    return -1;
}

static void read_env(void)
{
    const char *v = getenv("PARATAXIS_DUMP_SIGNAL");
    if (v == NULL || *v == '\0')
        return;
    int signo = signal_named(v);
    if (signo <= 0 || px_dump_signal(signo) != 0) {
        static const char msg[] = "parataxis: PARATAXIS_DUMP_SIGNAL names no signal "
                                  "that can be caught; no dump on a signal\n";
        ssize_t w = write(2, msg, sizeof msg - 1);
        (void)w;
    }
}

void px__dump_read_env(void)
{
    pthread_once(&sig_env_once, read_env);
    pthread_mutex_lock(&sig_lock);
    if (sig_no != 0 && !sig_thread)
        start_reader();   /* the child of a fork: its signal dumps its schedulers */
    pthread_mutex_unlock(&sig_lock);
}
