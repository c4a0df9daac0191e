/*
** fib_fanout.c -- fan-outs: a fiber that has not run holds no stack, a tree of
** a million fibers that join their children in turn runs depth first in little
** memory, and the two hand-offs that make it so (a join of a ready fiber runs
** it next; an end runs its first joiner next) give way to the queue after a
** bounded chain.  One behaviour per ctest (spec.h), fiber.<spec>.
**
** PX_FANOUT_LEAVES=n in the environment sets the leaves of the tree (a power
** of ten; default 1,000,000); the memory bound holds only at the default,
** which the plain build runs (the sanitizers' shadow and qemu cost far more).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../spec.h"

static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t n = strlen(field);
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0)
            kib = atol(line + n);
    if (f)
        fclose(f);
    return kib;
}

static void run(px_fiber_fn main, void *arg, size_t shared_stacks)
{
    px_sched_opts o;
    memset(&o, 0, sizeof o);
    o.shared_stacks = shared_stacks;
    px_sched *s = px_sched_new(&o);
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, main, arg), 0);
    CHECK_EQ(px_sched_run(s), 0);
    px_sched_free(s);
}

/* -- the skynet tree ------------------------------------------------------ */

/* A node: the first leaf's number and how many leaves it covers, packed in
** the argument (the number in the high bits, log10 of the size in the low 8). */
static void *node(void *arg)
{
    uintptr_t a = (uintptr_t)arg, num = a >> 8;
    unsigned level = (unsigned)(a & 0xff);
    if (level == 0)
        return (void *)num;
    uintptr_t step = 1, sum = 0;
    for (unsigned i = 1; i < level; i++)
        step *= 10;
    px_fiber *kids[10];
    for (uintptr_t i = 0; i < 10; i++) {
        kids[i] = px_spawn(node, (void *)(((num + i * step) << 8) | (level - 1)));
        CHECK(kids[i] != NULL);
    }
    for (int i = 0; i < 10; i++) {
        void *r;
        CHECK_EQ(px_join(kids[i], &r), 0);
        px_fiber_release(kids[i]);
        sum += (uintptr_t)r;
    }
    return (void *)sum;
}

static unsigned levels = 6;      /* 10^levels leaves */
static uintptr_t tree_sum;

static void *tree_main(void *arg)
{
    (void)arg;
    px_fiber *root = px_spawn(node, (void *)(uintptr_t)levels);
    CHECK(root != NULL);
    void *r;
    CHECK_EQ(px_join(root, &r), 0);
    px_fiber_release(root);
    tree_sum = (uintptr_t)r;
    return NULL;
}

static void set_levels(void)
{
    const char *env = getenv("PX_FANOUT_LEAVES");
    levels = 0;
    for (unsigned long n = env ? strtoul(env, NULL, 10) : 1000000; n >= 10; n /= 10)
        levels++;
}

static uintptr_t leaves(void)
{
    uintptr_t n = 1;
    for (unsigned i = 0; i < levels; i++)
        n *= 10;
    return n;
}

/* The tree runs in a forked child, so that what ran in this process before
** (all specs in one process, without a name) does not count: the child stays
** within 128 MiB at its peak (RUSAGE_CHILDREN: the largest child's) -- the
** tree costs tens of megabytes (records, a few thousand stacks), where one
** stack per fiber held at once would be gigabytes. */
static void tree(size_t shared_stacks)
{
    set_levels();
    uintptr_t n = leaves();
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        run(tree_main, NULL, shared_stacks);
        CHECK_EQ(tree_sum, n * (n - 1) / 2);
        exit(0);   /* not _exit: LSan checks the child at its exit */
    }
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct rusage ru;
    CHECK_EQ(getrusage(RUSAGE_CHILDREN, &ru), 0);
    printf("%lu leaves: sum %lu, peak RSS %ld MiB\n", (unsigned long)n,
           (unsigned long)(n * (n - 1) / 2), ru.ru_maxrss / 1024);
    if (n == 1000000)
        CHECK(ru.ru_maxrss <= 128 * 1024);
}

SPEC(a_million_fiber_fan_out_sums_right_within_a_memory_bound)
{
    tree(0);
}

SPEC(a_million_fiber_fan_out_on_a_shared_stack_sums_right)
{
    tree(1);
}

/* -- a fiber that has not run --------------------------------------------- */

enum { IDLE = 100000 };

/* TSan keeps about four bytes of shadow per byte of the records (2.3 KB a
** fiber there): its bound is a page, which one touched stack page a fiber,
** with its shadow, would exceed five times over. */
#ifdef PX_TEST_TSAN
enum { IDLE_BOUND = 4096 };
#else
enum { IDLE_BOUND = 1024 };
#endif
static int idle_ran;

static void *idle_body(void *arg)
{
    (void)arg;
    idle_ran++;
    return NULL;
}

/* 100,000 fibers spawned and not run yet cost their records, not a page of
** stack each: well under a kilobyte apiece (a page each would be 400 MiB;
** under TSan the shadow of a record alone is some 2 KiB). */
static void *unstarted_main(void *arg)
{
    (void)arg;
    px_fiber **f = malloc(IDLE * sizeof *f);
    CHECK(f != NULL);
    memset(f, 0, IDLE * sizeof *f);
    long before = status_kib("VmRSS:");
    for (int i = 0; i < IDLE; i++)
        CHECK((f[i] = px_spawn(idle_body, NULL)) != NULL);
    double per = (double)(status_kib("VmRSS:") - before) * 1024.0 / IDLE;
    printf("%d fibers not run yet: %.0f bytes resident each\n", IDLE, per);
    CHECK(per < IDLE_BOUND);
    CHECK_EQ(idle_ran, 0);
    for (int i = 0; i < IDLE; i++) {
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    CHECK_EQ(idle_ran, IDLE);
    free(f);
    return NULL;
}

SPEC(a_fiber_that_has_not_run_holds_no_stack)
{
    run(unstarted_main, NULL, 0);
}

/* -- the hand-offs -------------------------------------------------------- */

static char trail[64];
static size_t ntrail;

static void mark(char c)
{
    CHECK(ntrail + 1 < sizeof trail);
    trail[ntrail++] = c;
    trail[ntrail] = '\0';
}

static void *marker(void *arg)
{
    mark((char)(uintptr_t)arg);
    return NULL;
}

/* Joining c, spawned last, runs it before a and b, which were queued first;
** its end hands main the turn back; then a and b in the queue's order. */
static void *join_ready_main(void *arg)
{
    (void)arg;
    px_fiber *a = px_spawn(marker, (void *)'a');
    px_fiber *b = px_spawn(marker, (void *)'b');
    px_fiber *c = px_spawn(marker, (void *)'c');
    CHECK(a && b && c);
    CHECK_EQ(px_join(c, NULL), 0);
    mark('M');
    CHECK_EQ(px_join(a, NULL), 0);
    CHECK_EQ(px_join(b, NULL), 0);
    px_fiber_release(a);
    px_fiber_release(b);
    px_fiber_release(c);
    return NULL;
}

SPEC(a_join_of_a_ready_fiber_runs_it_next)
{
    ntrail = 0;
    run(join_ready_main, NULL, 0);
    /* a and b ran before main came back: its wake went behind them */
    CHECK(strcmp(trail, "cMab") == 0);
}

/* T waits for `go`; j1 then j2 join it; S sets go (T is queued), x marks,
** y marks and wakes main (queued behind T).  T's end runs its first joiner,
** j1, next -- before main, queued first -- and j2 in the queue's order, after
** main. */
static px_fiber *target;
static px_event *go, *fin;

static void *target_body(void *arg)
{
    (void)arg;
    CHECK_EQ(px_event_wait(go), 0);
    mark('T');
    return NULL;
}

static void *joiner_body(void *arg)
{
    CHECK_EQ(px_join(target, NULL), 0);
    mark((char)(uintptr_t)arg);
    return NULL;
}

static void *setter_body(void *arg)
{
    (void)arg;
    CHECK_EQ(px_event_set(go), 1);   /* the target */
    mark('s');
    return NULL;
}

static void *last_body(void *arg)
{
    (void)arg;
    mark('y');
    CHECK_EQ(px_event_set(fin), 1);  /* main */
    return NULL;
}

static void *end_main(void *arg)
{
    (void)arg;
    CHECK((go = px_event_new()) != NULL && (fin = px_event_new()) != NULL);
    CHECK((target = px_spawn(target_body, NULL)) != NULL);
    px_fiber *f[] = { px_spawn(joiner_body, (void *)'1'), px_spawn(joiner_body, (void *)'2'),
                      px_spawn(setter_body, NULL), px_spawn(marker, (void *)'x'),
                      px_spawn(last_body, NULL), target };
    CHECK_EQ(px_event_wait(fin), 0);
    mark('M');
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        CHECK(f[i] != NULL);
        CHECK_EQ(px_join(f[i], NULL), 0);
        px_fiber_release(f[i]);
    }
    CHECK_EQ(px_event_free(go), 0);
    CHECK_EQ(px_event_free(fin), 0);
    return NULL;
}

SPEC(an_ended_fiber_hands_off_to_its_first_joiner)
{
    ntrail = 0;
    run(end_main, NULL, 0);
    CHECK(strcmp(trail, "sxyT1M2") == 0);
}

/* main spawns and joins in a loop -- every join and every end a hand-off --
** while `other` waits in the queue: the chain gives way, and other runs within
** a bounded number of rounds. */
static int other_ran;
static long rounds_before_other;

static void *other_body(void *arg)
{
    (void)arg;
    other_ran = 1;
    return NULL;
}

static void *nothing(void *arg)
{
    return arg;
}

/* Each round first joins the child `arg` times (0 for the plain loop) under a
** scope that has fired already -- each join hands the child the turn, then
** returns at once, main still running -- and then joins it for good: main's
** later hand-offs in the turn are as much a part of the chain as its first,
** and other runs within the same bound. */
static void *chain_main(void *arg)
{
    px_fiber *other = px_spawn(other_body, NULL);
    CHECK(other != NULL);
    long i;
    for (i = 0; i < 100000 && !other_ran; i++) {
        px_fiber *f = px_spawn(nothing, NULL);
        CHECK(f != NULL);
        for (uintptr_t k = 0; k < (uintptr_t)arg; k++) {
            CHECK_EQ(px_scope_push_deadline(0), 0);
            CHECK_EQ(px_join(f, NULL), PX_ETIMEDOUT);
            CHECK_EQ(px_scope_pop(), PX_ETIMEDOUT);
        }
        CHECK_EQ(px_join(f, NULL), 0);
        px_fiber_release(f);
    }
    rounds_before_other = i;
    CHECK_EQ(px_join(other, NULL), 0);
    px_fiber_release(other);
    return NULL;
}

SPEC(hand_offs_give_way_to_the_queue_after_a_bounded_chain)
{
    run(chain_main, (void *)0, 0);
    printf("other ran after %ld rounds of spawn + join\n", rounds_before_other);
    CHECK(other_ran);
    /* a round is two hand-offs (the join, the end): the queue goes on after
    ** 256 of them, not before (on a FIFO-only engine other ran in round 1) */
    CHECK(rounds_before_other >= 256 / 2);
    CHECK(rounds_before_other <= 2 * 256 + 2);
}

SPEC(a_fiber_that_hands_off_twice_in_a_turn_still_gives_way_after_a_bounded_chain)
{
    /* 1 to 4 fired joins a round: the chain's bound falls on a join that
    ** returns at once in one of them (a refused hand-off must not restart
    ** the count either). */
    for (uintptr_t fired = 1; fired <= 4; fired++) {
        other_ran = 0;
        run(chain_main, (void *)fired, 0);
        printf("other ran after %ld rounds of spawn + %d fired join(s) + join\n",
               rounds_before_other, (int)fired);
        CHECK(other_ran);
        CHECK(rounds_before_other <= 2 * 256 + 2);
    }
}

SPECS(a_million_fiber_fan_out_sums_right_within_a_memory_bound,
      a_million_fiber_fan_out_on_a_shared_stack_sums_right,
      a_fiber_that_has_not_run_holds_no_stack,
      a_join_of_a_ready_fiber_runs_it_next,
      an_ended_fiber_hands_off_to_its_first_joiner,
      hand_offs_give_way_to_the_queue_after_a_bounded_chain,
      a_fiber_that_hands_off_twice_in_a_turn_still_gives_way_after_a_bounded_chain)
