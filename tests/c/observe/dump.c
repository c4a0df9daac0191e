/*
** dump.c -- px_sched_inspect, px_dump and px_dump_signal: every live fiber
** with its state, what it waits for and who holds it, how long it waited and
** where it is; on demand, and on a signal while fibers run or while the run
** waits in the kernel.
*/
#include <ctype.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../spec.h"

#define HOUR PX_SEC(3600)
#define MAX_SEEN 16

static px_fiber_info seen[MAX_SEEN];
static char seen_names[MAX_SEEN][PX_NAME_MAX];
static char seen_where[MAX_SEEN][128];
static int nseen;

/* Keeps a copy of each record (its pointers are valid only in the visit). */
static int keep(void *ctx, const px_fiber_info *i)
{
    (void)ctx;
    CHECK(nseen < MAX_SEEN);
    seen[nseen] = *i;
    snprintf(seen_names[nseen], PX_NAME_MAX, "%s", i->name ? i->name : "");
    snprintf(seen_where[nseen], sizeof seen_where[0], "%s", i->where ? i->where : "");
    nseen++;
    return 0;
}

static const px_fiber_info *by_number(uint64_t n)
{
    for (int i = 0; i < nseen; i++)
        if (seen[i].number == n)
            return &seen[i];
    return NULL;
}

static void inspect(void)
{
    nseen = 0;
    int n = px_sched_inspect(NULL, keep, NULL);
    CHECK_EQ(n, nseen);
}

/* px_dump's table, as text. */
static char table[16384];

static void dump_to_table(void)
{
    FILE *f = tmpfile();
    CHECK(f != NULL);
    CHECK(px_dump(NULL, f) >= 0);
    rewind(f);
    size_t n = fread(table, 1, sizeof table - 1, f);
    table[n] = '\0';
    fclose(f);
}

static void check_table_has(const char *want)
{
    if (strstr(table, want) == NULL) {
        fprintf(stderr, "the dump:\n%s\nlacks: %s\n", table, want);
        exit(1);
    }
}

static void *quick(void *arg)
{
    return arg;
}

static px_event *Never;

static void *parks(void *arg)
{
    (void)arg;
    px_event_wait(Never);
    return NULL;
}

/* -- states ------------------------------------------------------------------- */

static void *states_main(void *arg)
{
    (void)arg;
    px_fiber *parked = px_spawn(parks, NULL);   /* 2 */
    CHECK(parked != NULL);
    CHECK_EQ(px_yield(), 0);                    /* 2 parks */
    px_fiber *ended = px_spawn(quick, NULL);    /* 3 */
    CHECK(ended != NULL);
    CHECK_EQ(px_join(ended, NULL), 0);
    px_fiber *ready = px_spawn(quick, NULL);    /* 4, not run yet */
    CHECK(ready != NULL);
    inspect();
    CHECK_EQ(nseen, 3);                         /* the ended one is not listed */
    CHECK_EQ(by_number(1)->state, PX_FIBER_RUNNING);
    CHECK_EQ(by_number(2)->state, PX_FIBER_PARKED);
    CHECK(by_number(3) == NULL);
    CHECK_EQ(by_number(4)->state, PX_FIBER_READY);
    CHECK_EQ(by_number(1)->id, px_self());
    CHECK(by_number(2)->hosted == 0);
    CHECK_EQ(seen[0].number, 1);                /* in spawn order */
    dump_to_table();
    check_table_has("  fiber 1: running\n");
    check_table_has("  fiber 2: parked for ");
    check_table_has("  fiber 4: ready\n");
    check_table_has("(3 live)");
    CHECK(px_event_set(Never) >= 0);
    px_fiber_release(parked);
    px_fiber_release(ended);
    px_fiber_release(ready);
    return NULL;
}

SPEC(lists_every_live_fiber_with_its_state)
{
    CHECK((Never = px_event_new()) != NULL);
    CHECK_EQ(px_sched_inspect(NULL, keep, NULL), PX_EINVAL);   /* no scheduler here */
    CHECK_EQ(px_dump(NULL, NULL), PX_EINVAL);
    CHECK_EQ(px_run(states_main, NULL, NULL), 0);
    CHECK_EQ(px_event_free(Never), 0);
}

/* -- waits -------------------------------------------------------------------- */

static px_mutex *M;
static px_chan *C;
static int pipefd[2];

static void *holds_the_lock(void *arg)
{
    (void)arg;
    CHECK_EQ(px_fiber_set_name(0, "holder"), 0);
    CHECK_EQ(px_mutex_lock(M), 0);
    px_event_wait(Never);
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

static void *wants_the_lock(void *arg)
{
    (void)arg;
    CHECK_EQ(px_mutex_lock(M), 0);
    CHECK_EQ(px_mutex_unlock(M), 0);
    return NULL;
}

static void *receives(void *arg)
{
    (void)arg;
    void *v;
    CHECK_EQ(px_chan_recv(C, &v), 0);
    return NULL;
}

static void *sleeps(void *arg)
{
    (void)arg;
    px_sleep(HOUR);   /* ended by the cancel below */
    return NULL;
}

static void *reads(void *arg)
{
    (void)arg;
    CHECK_EQ(px_wait_fd(pipefd[0], PX_READABLE), 0);
    return NULL;
}

static void *waits_main(void *arg)
{
    px_fiber *f[5] = { px_spawn(holds_the_lock, NULL), px_spawn(wants_the_lock, NULL),
                       px_spawn(receives, NULL), px_spawn(sleeps, NULL),
                       px_spawn(reads, NULL) };   /* 2 to 6 */
    for (int i = 0; i < 5; i++)
        CHECK(f[i] != NULL);
    CHECK_EQ(px_fiber_set_name(px_fiber_id(f[1]), "waiter"), 0);
    CHECK_EQ(px_yield(), 0);   /* each runs to its wait */
    int64_t now = px_now();
    inspect();
    const px_fiber_info *w = by_number(3);
    CHECK_EQ(w->state, PX_FIBER_PARKED);
    CHECK(strcmp(w->reason, "Mutex lock") == 0 && strcmp(w->kind, "mutex") == 0);
    CHECK(w->object == M && strcmp(w->object_name, "accounts") == 0);
    CHECK_EQ(w->nholders, 1);
    CHECK_EQ(w->holders[0], px_fiber_id(f[0]));
    CHECK_EQ(w->deadline, INT64_MAX);
    CHECK_EQ(w->fd, -1);
    CHECK(strcmp(seen_names[2], "waiter") == 0);
    const px_fiber_info *r = by_number(4);
    CHECK(strcmp(r->reason, "Channel recv") == 0 && r->object == C);
    CHECK_EQ(r->object_name[0], '\0');          /* not named */
    const px_fiber_info *z = by_number(5);
    CHECK(strcmp(z->reason, "sleep") == 0 && z->object == NULL);
    CHECK(z->deadline > now + HOUR - PX_SEC(60) && z->deadline <= now + HOUR);
    const px_fiber_info *d = by_number(6);
    CHECK(strcmp(d->reason, "fd readable") == 0);
    CHECK_EQ(d->fd, pipefd[0]);
    CHECK_EQ(d->events, PX_READABLE);
    dump_to_table();
    char want[256];
    snprintf(want, sizeof want, "  fiber 3 \"waiter\": parked for ");
    check_table_has(want);
    snprintf(want, sizeof want, " on \"Mutex lock\", waits on mutex \"accounts\"@%p held by "
             "fiber 2 \"holder\"\n", (void *)M);
    check_table_has(want);
    snprintf(want, sizeof want, " on \"fd readable\", fd %d readable\n", pipefd[0]);
    check_table_has(want);
    check_table_has(" on \"sleep\", deadline in 359");   /* 3599.9... s, or a little less */
    /* Let every one go; the sleeper last, by a cancel of the whole run. */
    CHECK(px_event_set(Never) >= 0);
    CHECK_EQ(px_chan_send(C, NULL), 0);
    CHECK_EQ(write(pipefd[1], "x", 1), 1);
    for (int i = 0; i < 5; i++)
        if (i != 3) {
            CHECK_EQ(px_join(f[i], NULL), 0);
            px_fiber_release(f[i]);
        }
    px_fiber_release(f[3]);
    CHECK_EQ(px_sched_cancel(arg), 0);
    return NULL;
}

SPEC(names_what_each_fiber_waits_for_and_who_holds_it)
{
    CHECK((Never = px_event_new()) && (M = px_mutex_new()) && (C = px_chan_new(0)));
    CHECK_EQ(pipe(pipefd), 0);
    CHECK_EQ(px_object_set_name(M, "accounts"), 0);
    px_sched *s = px_sched_new(NULL);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, waits_main, s), 0);
    CHECK_EQ(px_sched_run(s), 0);
    px_sched_free(s);
    CHECK_EQ(px_event_free(Never), 0);
    CHECK_EQ(px_mutex_free(M), 0);
    CHECK_EQ(px_chan_free(C), 0);
    close(pipefd[0]);
    close(pipefd[1]);
}

/* Every other kind of wait: each fiber's reason, kind, object and holder. */

static px_rwlock *RW;
static px_sem *Sem;
static px_barrier *Bar;
static px_once *Once;
static px_waitgroup *WG;
static px_chan *C2;
static px_latch job_may_end;

static void *reads_then_waits(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_rdlock(RW), 0);
    px_event_wait(Never);
    CHECK_EQ(px_rwlock_rdunlock(RW), 0);
    return NULL;
}

static void *writes(void *arg)
{
    (void)arg;
    CHECK_EQ(px_rwlock_wrlock(RW), 0);
    CHECK_EQ(px_rwlock_wrunlock(RW), 0);
    return NULL;
}

static void *acquires(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sem_acquire(Sem), 0);
    return NULL;
}

static void *arrives(void *arg)
{
    (void)arg;
    CHECK(px_barrier_arrive_and_wait(Bar) >= 0);
    return NULL;
}

static int slow_init(void *arg)
{
    (void)arg;
    px_event_wait(Never);
    return 0;
}

static void *inits(void *arg)
{
    (void)arg;
    CHECK_EQ(px_once_do(Once, slow_init, NULL), 0);
    return NULL;
}

static void *waits_for_the_group(void *arg)
{
    (void)arg;
    CHECK_EQ(px_waitgroup_wait(WG), 0);
    return NULL;
}

static void *selects(void *arg)
{
    (void)arg;
    px_select_case cases[] = { { .kind = PX_SELECT_RECV, .obj = C2 },
                               { .kind = PX_SELECT_EVENT, .obj = Never } };
    CHECK(px_select(cases, 2) >= 0);
    return NULL;
}

static void *job(void *arg)
{
    EV_WAIT(&job_may_end, 1);
    return arg;
}

static void *runs_a_job(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run_blocking(job, NULL, NULL, 0, NULL), 0);
    return NULL;
}

static void *joins(void *arg)
{
    CHECK_EQ(px_join(arg, NULL), 0);
    return NULL;
}

typedef struct kind_case {
    px_fiber_fn fn;
    const char *reason, *kind;
    const void **object;     /* NULL: none */
    int holder;              /* the index of the holding fiber, or -1 */
} kind_case;

static void *every_kind_main(void *arg)
{
    (void)arg;
    const kind_case k[] = {
        { reads_then_waits, "Event wait", "event", (const void **)&Never, -1 },
        { writes, "RwLock write lock", "rwlock", (const void **)&RW, 0 },
        { acquires, "Semaphore acquire", "semaphore", (const void **)&Sem, -1 },
        { arrives, "Barrier arrive", "barrier", (const void **)&Bar, -1 },
        { inits, "Event wait", "event", (const void **)&Never, -1 },   /* runs slow_init */
        { inits, "Once init", "once", (const void **)&Once, 4 },
        { waits_for_the_group, "WaitGroup wait", "waitgroup", (const void **)&WG, -1 },
        { selects, "select", "select", NULL, -1 },
        { runs_a_job, "blocking job", "blocking job", NULL, -1 },
        { joins, "fiber join", "fiber", NULL, 0 },
    };
    enum { N = sizeof k / sizeof k[0] };
    px_fiber *f[N];
    for (int i = 0; i < N; i++) {
        CHECK((f[i] = px_spawn(k[i].fn, i == N - 1 ? f[0] : NULL)) != NULL);
        CHECK_EQ(px_yield(), 0);   /* in order: 0 reads first, 4 runs the Once */
    }
    CHECK_EQ(px_sleep(PX_MSEC(1)), 0);   /* the job is on its pool thread */
    inspect();
    for (int i = 0; i < N; i++) {
        const px_fiber_info *in = by_number((uint64_t)i + 2);
        CHECK(in != NULL && in->state == PX_FIBER_PARKED);
        if (strcmp(in->reason, k[i].reason) != 0 || strcmp(in->kind, k[i].kind) != 0) {
            fprintf(stderr, "fiber %d: %s %s\n", i + 2, in->reason, in->kind);
            exit(1);
        }
        if (k[i].object)
            CHECK(in->object == *k[i].object);
        if (k[i].holder >= 0) {
            CHECK_EQ(in->nholders, 1);
            CHECK_EQ(in->holders[0], px_fiber_id(f[k[i].holder]));
        }
    }
    /* Let every one go. */
    ev_set(&job_may_end);
    CHECK(px_event_set(Never) >= 0);
    CHECK_EQ(px_sem_release(Sem), 0);
    CHECK(px_barrier_arrive_and_wait(Bar) >= 0);
    CHECK_EQ(px_waitgroup_done(WG), 0);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    return NULL;
}

SPEC(names_every_kind_of_wait)
{
    CHECK((Never = px_event_new()) && (RW = px_rwlock_new()) && (Sem = px_sem_new(0)));
    CHECK((Bar = px_barrier_new(2)) && (Once = px_once_new()) && (WG = px_waitgroup_new()));
    CHECK((C2 = px_chan_new(0)) != NULL);
    CHECK_EQ(px_waitgroup_add(WG, 1), 0);
    ev_init(&job_may_end);
    CHECK_EQ(px_run(every_kind_main, NULL, NULL), 0);
    ev_destroy(&job_may_end);
    CHECK(!px_event_free(Never) && !px_rwlock_free(RW) && !px_sem_free(Sem));
    CHECK(!px_barrier_free(Bar) && !px_once_free(Once) && !px_waitgroup_free(WG));
    CHECK_EQ(px_chan_free(C2), 0);
}

/* -- how long ----------------------------------------------------------------- */

static void *long_wait_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(parks, NULL);
    CHECK(f != NULL);
    CHECK_EQ(px_sleep(PX_SEC(2)), 0);   /* virtual: at once */
    inspect();
    const px_fiber_info *i = by_number(2);
    CHECK_EQ(i->state, PX_FIBER_PARKED);
    CHECK(i->parked_ns >= PX_SEC(2) - PX_MSEC(1) && i->parked_ns <= PX_SEC(2) + PX_MSEC(1));
    dump_to_table();
    check_table_has("  fiber 2: parked for 2.00");
    CHECK(px_event_set(Never) >= 0);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    return NULL;
}

SPEC(tells_how_long_each_fiber_waited)
{
    CHECK((Never = px_event_new()) != NULL);
    px_sched_opts o = { .clock = PX_CLOCK_VIRTUAL };
    CHECK_EQ(px_run_with(&o, long_wait_main, NULL, NULL), 0);
    CHECK_EQ(px_event_free(Never), 0);
}

/* A scheduler's milliseconds fill 32 bits in 49.7 days (a server's uptime, or
** one sleep on a virtual clock): a wait that began after is still measured. */
static void *parks_late(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sleep(50 * 24 * HOUR), 0);
    px_event_wait(Never);
    return NULL;
}

static void *later_wait_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(parks_late, NULL);
    CHECK(f != NULL);
    CHECK_EQ(px_sleep(50 * 24 * HOUR + HOUR), 0);
    inspect();
    const px_fiber_info *i = by_number(2);
    CHECK_EQ(i->state, PX_FIBER_PARKED);
    CHECK(i->parked_ns >= HOUR - PX_MSEC(1) && i->parked_ns <= HOUR + PX_MSEC(1));
    CHECK(px_event_set(Never) >= 0);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    return NULL;
}

static void quiet(void *ctx, const char *text)
{
    (void)ctx;
    (void)text;
}

SPEC(tells_how_long_a_wait_after_fifty_days_took)
{
    CHECK((Never = px_event_new()) != NULL);
    px_sched_opts o = { .clock = PX_CLOCK_VIRTUAL, .on_deadlock = quiet };
    CHECK_EQ(px_run_with(&o, later_wait_main, NULL, NULL), 0);
    /* Between runs, on the scheduler's own clock: the wait began at its end. */
    CHECK_EQ(px_event_free(Never), 0);
    CHECK((Never = px_event_new()) != NULL);
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, parks_late, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    nseen = 0;
    CHECK_EQ(px_sched_inspect(s, keep, NULL), 1);
    CHECK(seen[0].parked_ns < PX_MSEC(1));
    px_sched_free(s);
    CHECK_EQ(px_event_free(Never), 0);
}

/* -- where -------------------------------------------------------------------- */

/* Exported (not static): the dynamic linker knows it by name. */
void *observe_dump_worker(void *arg);
void *observe_dump_worker(void *arg)
{
    (void)arg;
    px_event_wait(Never);
    return NULL;
}

static int hosted_turns;

static int hosted_resume(void *ctx)
{
    (void)ctx;
    if (hosted_turns++ == 0)
        return px_event_wait(Never) == PX_EYIELD ? 0 : PX_HOST_DONE;
    return px_event_wait(Never) == 0 ? PX_HOST_DONE : 0;
}

static size_t describe(void *ctx, uint64_t id, void *host_ctx, char *buf, size_t cap)
{
    CHECK(ctx == &hosted_turns && host_ctx == &hosted_turns);
    return (size_t)snprintf(buf, cap, "line one of fiber %llu\nline two",
                            (unsigned long long)px_fiber_number(id));
}

static void *where_main(void *arg)
{
    px_sched *s = arg;
    px_fiber *c = px_spawn(observe_dump_worker, NULL);     /* 2 */
    px_fiber *anon = px_spawn(parks, NULL);                /* 3 */
    static const px_host_ops ops = { hosted_resume, NULL, NULL };
    px_fiber *h = px_spawn_hosted(s, &ops, &hosted_turns);   /* 4 */
    CHECK(c && anon && h);
    CHECK_EQ(px_yield(), 0);
    inspect();
    CHECK(by_number(2)->fn == observe_dump_worker);
    CHECK(strcmp(seen_where[1], "observe_dump_worker") == 0);
    CHECK(by_number(3)->fn == parks);   /* static: no symbol, only its address */
    CHECK_EQ(seen_where[2][0], '\0');
    CHECK(by_number(4)->hosted && by_number(4)->fn == NULL);
    CHECK(strcmp(seen_where[3], "line one of fiber 4\nline two") == 0);
    dump_to_table();
    check_table_has("  fiber 2: parked for ");
    check_table_has("\n      observe_dump_worker\n");
    check_table_has("\n      in the function at 0x");
    check_table_has("\n      line one of fiber 4\n      line two\n");
    CHECK(px_event_set(Never) >= 0);
    px_fiber_release(c);
    px_fiber_release(anon);
    px_fiber_release(h);
    return NULL;
}

SPEC(shows_where_each_fiber_is)
{
    CHECK((Never = px_event_new()) != NULL);
    px_sched *s = px_sched_new(&(px_sched_opts){ .describe = describe,
                                                 .describe_ctx = &hosted_turns });
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, where_main, s), 0);
    CHECK_EQ(px_sched_run(s), 0);
    px_sched_free(s);
    CHECK_EQ(px_event_free(Never), 0);
}

/* -- on a signal -------------------------------------------------------------- */

static FILE *err;   /* stderr while a spec takes it */
static int saved_stderr;

static void take_stderr(void)
{
    CHECK((err = tmpfile()) != NULL);
    fflush(stderr);
    CHECK((saved_stderr = dup(2)) >= 0);
    CHECK_EQ(dup2(fileno(err), 2), 2);
}

/* What was written to stderr since take_stderr, into table. */
static void read_stderr(void)
{
    fflush(stderr);
    long at = ftell(err);
    rewind(err);
    size_t n = fread(table, 1, sizeof table - 1, err);
    table[n] = '\0';
    fseek(err, at, SEEK_SET);
}

static void give_stderr_back(void)
{
    fflush(stderr);
    CHECK_EQ(dup2(saved_stderr, 2), 2);
    close(saved_stderr);
    fclose(err);
}

static volatile int spinning = 1;

static void *spinner(void *arg)
{
    (void)arg;
    while (spinning)
        CHECK_EQ(px_yield(), 0);
    return NULL;
}

static void *signal_running_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(spinner, NULL);
    CHECK(f != NULL);
    CHECK_EQ(px_fiber_set_name(px_fiber_id(f), "spinner"), 0);   /* before it runs */
    CHECK_EQ(raise(SIGUSR1), 0);
    /* Fibers keep running: the dump comes at a turn of the loop. */
    int64_t until = px_now() + PX_TEST_TIMEOUT_NS;
    for (;;) {
        CHECK_EQ(px_yield(), 0);
        read_stderr();
        if (strstr(table, "(2 live)") || px_now() > until)
            break;
    }
    spinning = 0;
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    return NULL;
}

SPEC(from_a_signal_while_fibers_run)
{
    CHECK_EQ(px_dump_signal(SIGKILL), PX_EINVAL);
    CHECK_EQ(px_dump_signal(-1), PX_EINVAL);
    CHECK_EQ(px_dump_signal(SIGUSR1), 0);
    take_stderr();
    int r = px_run(signal_running_main, NULL, NULL);
    read_stderr();
    give_stderr_back();
    CHECK_EQ(r, 0);
    if (strstr(table, "(2 live)") == NULL)
        fprintf(stderr, "stderr:\n%s\n", table);
    check_table_has("parataxis: the fibers of scheduler ");
    check_table_has("  fiber 2 \"spinner\": ");
    CHECK_EQ(px_dump_signal(0), 0);
}

static px_latch dumped;

/* Sends the signal until a dump shows the main fiber parked on its fd: then
** the run had nothing to do but wait in the kernel.  Then lets it go on. */
static void *signaller(void *arg)
{
    (void)arg;
    int64_t until = px_now() + PX_TEST_TIMEOUT_NS;
    char want[64];
    snprintf(want, sizeof want, "fd %d readable", pipefd[0]);
    while (px_now() < until) {
        CHECK_EQ(kill(getpid(), SIGUSR1), 0);
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
        read_stderr();
        if (strstr(table, want))
            break;
    }
    ev_set(&dumped);
    CHECK_EQ(write(pipefd[1], "x", 1), 1);
    return NULL;
}

static void *signal_waiting_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_fiber_set_name(0, "reader"), 0);
    CHECK_EQ(px_wait_fd(pipefd[0], PX_READABLE), 0);
    return NULL;
}

SPEC(from_a_signal_while_the_run_waits_in_the_kernel)
{
    CHECK_EQ(pipe(pipefd), 0);
    ev_init(&dumped);
    CHECK_EQ(px_dump_signal(SIGUSR1), 0);
    take_stderr();
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, signaller, NULL), 0);
    int r = px_run(signal_waiting_main, NULL, NULL);
    pthread_join(t, NULL);
    read_stderr();
    give_stderr_back();
    CHECK_EQ(r, 0);
    char want[128];
    snprintf(want, sizeof want, "  fiber 1 \"reader\": parked for ");
    check_table_has(want);
    snprintf(want, sizeof want, " on \"fd readable\", fd %d readable\n", pipefd[0]);
    check_table_has(want);
    CHECK_EQ(px_dump_signal(0), 0);
    ev_destroy(&dumped);
    close(pipefd[0]);
    close(pipefd[1]);
}

/* The child of a fork has a pipe and a reader of its own: its signal dumps
** its schedulers, not its parent's.  Each run raises the signal in its one
** fiber, named after its process, and waits for the dump. */
static void *dumped_main(void *arg)
{
    CHECK_EQ(px_fiber_set_name(0, arg), 0);
    CHECK_EQ(raise(SIGUSR1), 0);
    int64_t until = px_now() + PX_SEC(2);
    do {
        CHECK_EQ(px_sleep(PX_MSEC(5)), 0);
        read_stderr();
    } while (strstr(table, "(1 live)") == NULL && px_now() < until);
    return NULL;
}

/* 0 when a run of dumped_main(name) dumped its fiber. */
static int run_dumped(char *name)
{
    char want[64];
    snprintf(want, sizeof want, "  fiber 1 \"%s\": ", name);
    take_stderr();
    int r = px_run(dumped_main, name, NULL);
    read_stderr();
    give_stderr_back();
    if (r != 0 || strstr(table, want) == NULL) {
        fprintf(stderr, "the %s's stderr (run: %d):\n%s\n", name, r, table);
        return 1;
    }
    return 0;
}

SPEC(from_a_signal_in_the_child_of_a_fork)
{
#ifdef PX_TEST_TSAN
    exit(77);   /* TSan does not follow a fork of a threaded process (tests/c/fork) */
#endif
    CHECK_EQ(px_dump_signal(SIGUSR1), 0);
    CHECK_EQ(run_dumped("parent"), 0);   /* its reader runs: the fork copies no thread mid-start */
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(run_dumped("child"));
    int ws;
    CHECK_EQ(waitpid(pid, &ws, 0), pid);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    CHECK_EQ(run_dumped("parent"), 0);   /* and the parent's signal still dumps the parent */
    CHECK_EQ(px_dump_signal(0), 0);
}

/* Two schedulers dump at once, as a signal makes every scheduler do: each
** table comes whole, its lines not cut by the other's. */
enum { DUMPERS = 2, DUMPS = 20, PARKED = 40 };
static px_latch dumpers_ready, dumpers_go;

static void *parks_on(void *arg)
{
    CHECK_EQ(px_event_wait(arg), 0);
    return NULL;
}

static void *dumper_main(void *arg)
{
    (void)arg;
    px_event *e = px_event_new();
    CHECK(e != NULL);
    for (int i = 0; i < PARKED; i++) {
        px_fiber *f = px_spawn(parks_on, e);
        CHECK(f != NULL);
        px_fiber_release(f);
    }
    CHECK_EQ(px_yield(), 0);   /* they all park */
    ev_set(&dumpers_ready);
    EV_WAIT(&dumpers_go, 1);
    for (int i = 0; i < DUMPS; i++)
        CHECK_EQ(px_dump(NULL, stderr), PARKED + 1);
    CHECK(px_event_set(e) >= 0);
    CHECK_EQ(px_yield(), 0);   /* they all end */
    CHECK_EQ(px_event_free(e), 0);
    return NULL;
}

static void *dumper(void *arg)
{
    (void)arg;
    CHECK_EQ(px_run(dumper_main, NULL, NULL), 0);
    return NULL;
}

/* "  fiber N: parked for ... waits on event@0x<hex>\n", nothing else in it. */
static int whole_line(const char *line)
{
    const char *p = strstr(line, "waits on event@0x");
    if (strncmp(line, "  fiber ", 8) != 0 || strstr(line + 8, "fiber") || p == NULL)
        return 0;
    for (p += strlen("waits on event@0x"); isxdigit((unsigned char)*p); p++)
        ;
    return strcmp(p, "\n") == 0;
}

SPEC(tables_written_at_once_do_not_mix)
{
    ev_init(&dumpers_ready);
    ev_init(&dumpers_go);
    take_stderr();
    pthread_t t[DUMPERS];
    for (int i = 0; i < DUMPERS; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, dumper, NULL), 0);
    EV_WAIT(&dumpers_ready, DUMPERS);
    ev_set(&dumpers_go);
    for (int i = 0; i < DUMPERS; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);
    fflush(stderr);
    rewind(err);
    char line[512];
    int whole = 0;
    while (fgets(line, sizeof line, err))
        whole += whole_line(line);
    give_stderr_back();
    CHECK_EQ(whole, DUMPERS * DUMPS * PARKED);
    ev_destroy(&dumpers_ready);
    ev_destroy(&dumpers_go);
}

/* glibc keeps two signals under SIGRTMIN for itself: sigaction refuses them. */
SPEC(a_refused_signal_leaves_the_one_in_place)
{
    struct sigaction now;
    CHECK_EQ(px_dump_signal(SIGUSR1), 0);
    CHECK_EQ(sigaction(SIGUSR1, NULL, &now), 0);
    void (*ours)(int) = now.sa_handler;
    CHECK(ours != SIG_DFL);
    if (px_dump_signal(SIGRTMIN - 1) == PX_EINVAL) {
        CHECK_EQ(sigaction(SIGUSR1, NULL, &now), 0);
        CHECK(now.sa_handler == ours);   /* SIGUSR1 still dumps: it does not kill */
    }
    CHECK_EQ(px_dump_signal(0), 0);
    CHECK_EQ(sigaction(SIGUSR1, NULL, &now), 0);
    CHECK(now.sa_handler == SIG_DFL);
}

/* -- another thread's scheduler ---------------------------------------------------- */

static px_sched *Other;
static px_latch other_running, other_may_end;

static void *other_main(void *arg)
{
    (void)arg;
    ev_set(&other_running);
    while (!ev_wait_n_ns(&other_may_end, 1, 0))
        CHECK_EQ(px_sleep(PX_MSEC(1)), 0);
    return NULL;
}

static void *other_thread(void *arg)
{
    (void)arg;
    CHECK_EQ(px_sched_run(Other), 0);
    return NULL;
}

SPEC(refuses_a_scheduler_running_on_another_thread)
{
    ev_init(&other_running);
    ev_init(&other_may_end);
    CHECK((Other = px_sched_new(NULL)) != NULL);
    CHECK_EQ(px_sched_post(Other, other_main, NULL), 0);
    nseen = 0;
    CHECK_EQ(px_sched_inspect(Other, keep, NULL), 0);   /* not running yet: no fiber */
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, other_thread, NULL), 0);
    EV_WAIT(&other_running, 1);
    CHECK_EQ(px_sched_inspect(Other, keep, NULL), PX_ETHREAD);
    CHECK_EQ(px_dump(Other, NULL), PX_ETHREAD);
    ev_set(&other_may_end);
    pthread_join(t, NULL);
    CHECK_EQ(px_sched_inspect(Other, keep, NULL), PX_ETHREAD);   /* bound to that thread */
    CHECK_EQ(px_sched_inspect(Other, NULL, NULL), PX_ETHREAD);
    px_sched_free(Other);
    ev_destroy(&other_running);
    ev_destroy(&other_may_end);
}

SPECS(lists_every_live_fiber_with_its_state, names_what_each_fiber_waits_for_and_who_holds_it,
      names_every_kind_of_wait,
      tells_how_long_each_fiber_waited, shows_where_each_fiber_is,
      from_a_signal_while_fibers_run, from_a_signal_while_the_run_waits_in_the_kernel,
      refuses_a_scheduler_running_on_another_thread, a_refused_signal_leaves_the_one_in_place,
      tells_how_long_a_wait_after_fifty_days_took, from_a_signal_in_the_child_of_a_fork,
      tables_written_at_once_do_not_mix)
