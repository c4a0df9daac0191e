/*
** fib_overflow.c -- a runaway fiber is reported as "parataxis: fiber N
** overflowed its stack" (then SIGABRT) on every kind of stack the library
** hands out, not only on the guarded ones within the budget:
**
**   - slab stacks (PARATAXIS_GUARDED_STACKS=0, and past a budget of 2): the
**     recursion runs down through the lower stacks of its slab, which are
**     parked fibers', and meets the guard at the slab's low end;
**   - frames bigger than a page (40 KiB, written lowest byte first, as code
**     built without -fstack-clash-protection does), on a guarded stack and on
**     a slab stack: the guard is wider than such a frame, so none jumps it;
**   - a stack taken at the runaway's first turn, not at its spawn: one that
**     fibers which ran and ended meanwhile gave back (guarded, and slab);
**   - shared stacks (px_sched_opts.shared_stacks), with the runaway's
**     neighbours parked on the same stack, their bytes copied away, even with
**     no guarded stacks at all: each shared stack has a guard of its own.
**
** One SPEC (one ctest fiber.<name>) per kind of stack and frame.  Each case
** runs in a forked child whose stderr the parent reads.  The child
** names the fiber it expects in its first line ("expect N").  Under ASan the
** stacks of parked fibers carry poisoned redzones, so a runaway that reaches
** them may be stopped by ASan's own report first (a stack-buffer-overflow or
** -underflow, by the redzone it meets): that is accepted there.
*/
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../spec.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif

/* -- what runs in the child ------------------------------------------------ */

static long small_frames(long depth);
static long big_frames(long depth);
/* Through volatile pointers: no tail call, no merged frames. */
static long (*volatile small_next)(long) = small_frames;
static long (*volatile big_next)(long) = big_frames;

static long small_frames(long depth)
{
    volatile char buf[256];
    for (int i = 0; i < 256; i++)
        buf[i] = (char)depth;
    return small_next(depth + 1) + buf[7];
}

static long big_frames(long depth)
{
    volatile char buf[40 * 1024];
    buf[0] = (char)depth;   /* the lowest byte first: the pages above go untouched */
    return big_next(depth + 1) + buf[0];
}

static int big;              /* which recursion the runaway runs */
static int neighbours;       /* parked fibers spawned before the runaway */
static int recycled;         /* fibers run to their end after its spawn */

static int runaway_started;

static void *runaway(void *arg)
{
    (void)arg;
    runaway_started = 1;
    return (void *)(big ? big_frames(0) : small_frames(0));
}

static void *returns(void *arg)
{
    return arg;
}

static void *parker(void *arg)
{
    (void)arg;
    px_park("neighbour", NULL, NULL);
    return NULL;
}

static void *main_fiber(void *arg)
{
    (void)arg;
    for (int i = 0; i < neighbours; i++)
        px_fiber_release(px_spawn(parker, NULL));
    px_yield();   /* they park on the stacks below the runaway's */
    px_fiber *f = px_spawn(runaway, NULL);
    CHECK(f != NULL);
    fprintf(stderr, "expect %llu\n", (unsigned long long)px_fiber_number(px_fiber_id(f)));
    for (int i = 0; i < recycled; i++) {
        /* the join runs it at once, ahead of the runaway; its stack goes back */
        px_fiber *done = px_spawn(returns, NULL);
        CHECK(done != NULL);
        CHECK_EQ(px_join(done, NULL), 0);
        px_fiber_release(done);
        CHECK(!runaway_started);
    }
    px_join(f, NULL);
    return NULL;
}

static int shared;           /* run on that many shared stacks (0: px_run) */

static void child(const char *guarded_budget)
{
    if (guarded_budget)
        setenv("PARATAXIS_GUARDED_STACKS", guarded_budget, 1);
    if (shared) {
        px_sched_opts o;
        memset(&o, 0, sizeof o);
        o.shared_stacks = (size_t)shared;
        px_sched *s = px_sched_new(&o);
        px_sched_post(s, main_fiber, NULL);
        px_sched_run(s);
    } else {
        px_run(main_fiber, NULL, NULL);
    }
    _exit(3);   /* not reached: the overflow aborts */
}

/* -- the parent ------------------------------------------------------------ */

static void expect_report_on(const char *what, const char *guarded_budget, int big_frame,
                             int n_neighbours, int n_shared, int n_recycled)
{
    int fds[2], status;
    char out[8192], sink[4096];
    size_t n = 0;
    ssize_t r;
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        big = big_frame;
        neighbours = n_neighbours;
        shared = n_shared;
        recycled = n_recycled;
        child(guarded_budget);
    }
    close(fds[1]);
    while (n < sizeof out - 1 && (r = read(fds[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    while (read(fds[0], sink, sizeof sink) > 0)
        ;   /* the rest (a sanitizer's report): the child must not die of SIGPIPE */
    close(fds[0]);
    CHECK(waitpid(pid, &status, 0) == pid);
    fprintf(stderr, "%s: child said: %s", what, out);
    if (WIFSIGNALED(status))
        fprintf(stderr, "%s: child died of signal %d\n", what, WTERMSIG(status));
    unsigned long long id = 0;
    CHECK(sscanf(out, "expect %llu", &id) == 1 && id != 0);
    char want[96];
    snprintf(want, sizeof want, "parataxis: fiber %llu overflowed its stack", id);
#ifdef ASAN
    if (strstr(out, want) == NULL) {
        /* over- or underflow: which redzone of a parked frame it meets first */
        CHECK(strstr(out, "AddressSanitizer: stack-buffer-overflow") != NULL ||
              strstr(out, "AddressSanitizer: stack-buffer-underflow") != NULL);
        CHECK(!WIFEXITED(status) || WEXITSTATUS(status) != 3);
        return;
    }
#endif
    CHECK(strstr(out, want) != NULL);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void expect_report(const char *what, const char *guarded_budget, int big_frame,
                          int n_neighbours)
{
    expect_report_on(what, guarded_budget, big_frame, n_neighbours, 0, 0);
}

/* The runaway is spawned, then three fibers run and end: at its first turn
** it takes the stack the last of them gave back. */
SPEC(overflow_on_a_stack_taken_at_the_first_turn_is_reported)
{
    expect_report_on("guarded, taken at the first turn", NULL, 0, 0, 0, 3);
}

SPEC(overflow_on_a_slab_stack_taken_at_the_first_turn_is_reported)
{
    expect_report_on("slab, taken at the first turn", "0", 0, 20, 0, 3);
}

SPEC(overflow_on_a_slab_stack_is_reported)
{
    expect_report("slab, no guarded stacks", "0", 0, 20);
}

SPEC(overflow_past_the_guarded_budget_is_reported)
{
    expect_report("slab, past a budget of 2", "2", 0, 20);
}

SPEC(overflow_on_the_lowest_slot_of_a_slab_is_reported)
{
    expect_report("slab, lowest slot", "0", 0, 0);
}

SPEC(overflow_by_frames_bigger_than_a_page_on_a_guarded_stack_is_reported)
{
    expect_report("guarded, 40 KiB frames", NULL, 1, 0);
}

SPEC(overflow_by_frames_bigger_than_a_page_on_a_slab_stack_is_reported)
{
    expect_report("slab, 40 KiB frames", "0", 1, 20);
}

/* Shared stacks: the runaway's neighbours (and the main fiber) are parked on
** its stack, their bytes copied away; past the budget too, since a shared
** stack has its guard whatever the budget. */
SPEC(overflow_on_a_shared_stack_is_reported)
{
    expect_report_on("shared", NULL, 0, 20, 1, 0);
}

SPEC(overflow_on_a_shared_stack_without_guarded_stacks_is_reported)
{
    expect_report_on("shared, no guarded stacks", "0", 0, 20, 2, 0);
}

SPEC(overflow_by_frames_bigger_than_a_page_on_a_shared_stack_is_reported)
{
    expect_report_on("shared, 40 KiB frames", NULL, 1, 20, 1, 0);
}

SPECS(overflow_on_a_slab_stack_is_reported, overflow_past_the_guarded_budget_is_reported,
      overflow_on_a_stack_taken_at_the_first_turn_is_reported,
      overflow_on_a_slab_stack_taken_at_the_first_turn_is_reported,
      overflow_on_the_lowest_slot_of_a_slab_is_reported,
      overflow_by_frames_bigger_than_a_page_on_a_guarded_stack_is_reported,
      overflow_by_frames_bigger_than_a_page_on_a_slab_stack_is_reported,
      overflow_on_a_shared_stack_is_reported,
      overflow_on_a_shared_stack_without_guarded_stacks_is_reported,
      overflow_by_frames_bigger_than_a_page_on_a_shared_stack_is_reported)
