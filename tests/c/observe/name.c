/*
** name.c -- fiber numbers and names, object names: what reports and trace
** lines print so that a person can map a fiber to the code.
*/
#include <fcntl.h>
#include <unistd.h>

#include "../spec.h"

#define HOUR PX_SEC(3600)

/* -- a report ---------------------------------------------------------------- */

static char said[8192];
static px_mutex *M;
static px_event *Never;
static uint64_t holder_id, waiter_id;

static void keep_report(void *ctx, const char *text)
{
    (void)ctx;
    snprintf(said, sizeof said, "%s", text);
}

static void *holder(void *arg)
{
    (void)arg;
    CHECK_EQ(px_fiber_set_name(0, "holder"), 0);
    CHECK_EQ(px_mutex_lock(M), 0);
    px_event_wait(Never);   /* for good: the deadlock */
    return NULL;
}

static void *waiter(void *arg)
{
    (void)arg;
    px_mutex_lock(M);
    return NULL;
}

static void *report_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_fiber_set_name(0, "main"), 0);
    px_fiber *h = px_spawn(holder, NULL), *w = px_spawn(waiter, NULL);
    CHECK(h && w);
    holder_id = px_fiber_id(h);
    waiter_id = px_fiber_id(w);
    CHECK_EQ(px_fiber_set_name(waiter_id, "waiter"), 0);   /* another fiber, by id */
    px_fiber_release(h);
    px_fiber_release(w);
    return NULL;
}

SPEC(reports_print_numbers_and_names)
{
    M = px_mutex_new();
    Never = px_event_new();
    CHECK(M && Never);
    CHECK_EQ(px_object_set_name(M, "accounts"), 0);
    px_sched *s = px_sched_new(&(px_sched_opts){ .on_deadlock = keep_report });
    CHECK(s != NULL);
    CHECK_EQ(px_sched_post(s, report_main, NULL), 0);
    CHECK_EQ(px_sched_run(s), PX_EDEADLK);
    char want[256];
    snprintf(want, sizeof want,
             "  fiber 3 \"waiter\": parked on \"Mutex lock\", waits on mutex \"accounts\"@%p "
             "held by fiber 2 \"holder\"\n", (void *)M);
    if (strstr(said, want) == NULL)
        fprintf(stderr, "report:\n%s\nwanted:\n%s", said, want);
    CHECK(strstr(said, want) != NULL);
    CHECK(strstr(said, "  fiber 2 \"holder\": parked on \"Event wait\"") != NULL);
    CHECK(strstr(said, "fiber 1") == NULL);   /* main ended: not listed */
    CHECK(strstr(said, "1099511627") == NULL);   /* no 64-bit id anywhere */
    px_sched_free(s);
    CHECK_EQ(px_mutex_free(M), 0);
    CHECK_EQ(px_event_free(Never), 0);
}

/* -- refusals ----------------------------------------------------------------- */

static void *quick(void *arg)
{
    return arg;
}

static void *refusal_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(quick, NULL);
    CHECK(f != NULL);
    uint64_t id = px_fiber_id(f);
    CHECK_EQ(px_fiber_set_name(id, "soon gone"), 0);
    CHECK(strcmp(px_fiber_name(id), "soon gone") == 0);
    CHECK_EQ(px_join(f, NULL), 0);
    CHECK_EQ(px_fiber_set_name(id, "late"), PX_ENOFIBER);   /* ended */
    CHECK(px_fiber_name(id) == NULL);
    px_fiber_release(f);
    CHECK_EQ(px_fiber_set_name(id + 1000, "nobody"), PX_ENOFIBER);   /* never was */
    CHECK_EQ(px_fiber_set_name(UINT64_MAX, "nobody"), PX_ENOFIBER);
    CHECK(px_fiber_name(UINT64_MAX) == NULL);
    /* A long name is cut to PX_NAME_MAX - 1 bytes; NULL takes the name away. */
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_EQ(px_fiber_set_name(0, longname), 0);
    CHECK_EQ(strlen(px_fiber_name(0)), PX_NAME_MAX - 1);
    CHECK_EQ(px_fiber_set_name(0, NULL), 0);
    CHECK(px_fiber_name(0) == NULL);
    return NULL;
}

SPEC(naming_an_unknown_or_ended_fiber_is_refused)
{
    CHECK_EQ(px_fiber_set_name(0, "off any run"), PX_ENOFIBER);
    CHECK(px_fiber_name(0) == NULL);
    CHECK_EQ(px_run(refusal_main, NULL, NULL), 0);
}

/* -- numbers ------------------------------------------------------------------ */

static void *count_main(void *arg)
{
    (void)arg;
    CHECK_EQ(px_fiber_number(px_self()), 1);
    for (uint64_t n = 2; n < 6; n++) {
        px_fiber *f = px_spawn(quick, NULL);
        CHECK(f != NULL);
        CHECK_EQ(px_fiber_number(px_fiber_id(f)), n);
        CHECK_EQ(px_join(f, NULL), 0);
        px_fiber_release(f);
    }
    return NULL;
}

SPEC(numbers_count_from_one_in_each_run)
{
    CHECK_EQ(px_fiber_number(0), 0);
    for (int run = 0; run < 3; run++)
        CHECK_EQ(px_run(count_main, NULL, NULL), 0);
}

/* -- object names ------------------------------------------------------------- */

SPEC(an_object_name_goes_with_the_object)
{
    char buf[PX_NAME_MAX];
    CHECK_EQ(px_object_set_name(NULL, "x"), PX_EINVAL);
    px_mutex *m = px_mutex_new();
    CHECK(m != NULL);
    CHECK_EQ(px_object_name(m, buf, sizeof buf), 0);
    CHECK_EQ(px_object_set_name(m, "ledger"), 0);
    CHECK_EQ(px_object_name(m, buf, sizeof buf), 6);
    CHECK(strcmp(buf, "ledger") == 0);
    CHECK_EQ(px_object_name(m, buf, 4), 3);   /* cut to the room given */
    CHECK(strcmp(buf, "led") == 0);
    CHECK_EQ(px_object_set_name(m, "journal"), 0);   /* renamed */
    CHECK_EQ(px_object_name(m, buf, sizeof buf), 7);
    CHECK_EQ(px_object_set_name(m, NULL), 0);
    CHECK_EQ(px_object_name(m, buf, sizeof buf), 0);
    /* Freed: a name does not outlive its object (the next one at the same
    ** address starts unnamed).  Many names, so the table grows and shrinks. */
    px_chan *c[500];
    for (int i = 0; i < 500; i++) {
        CHECK((c[i] = px_chan_new(1)) != NULL);
        snprintf(buf, sizeof buf, "chan %d", i);
        CHECK_EQ(px_object_set_name(c[i], buf), 0);
    }
    CHECK_EQ(px_object_set_name(m, "ledger"), 0);
    CHECK_EQ(px_mutex_free(m), 0);
    for (int i = 0; i < 500; i++) {
        snprintf(buf, sizeof buf, "chan %d", i);
        char got[PX_NAME_MAX];
        CHECK(px_object_name(c[i], got, sizeof got) > 0 && strcmp(got, buf) == 0);
        CHECK_EQ(px_chan_free(c[i]), 0);
    }
    for (int i = 0; i < 100; i++) {
        px_mutex *again = px_mutex_new();
        CHECK(again != NULL);
        CHECK_EQ(px_object_name(again, buf, sizeof buf), 0);
        CHECK_EQ(px_mutex_free(again), 0);
    }
}

static void *returns(void *arg)
{
    return arg;
}

static void *named_handle_main(void *arg)
{
    (void)arg;
    char buf[PX_NAME_MAX];
    px_fiber *f = px_spawn(returns, NULL);
    CHECK(f != NULL);
    uintptr_t was = (uintptr_t)f;
    CHECK_EQ(px_object_set_name(f, "first"), 0);   /* what its joiners wait on */
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    /* Its record goes to the next fiber: the name must not. */
    px_fiber *g = px_spawn(returns, NULL);
    CHECK(g != NULL);
    CHECK((uintptr_t)g == was);   /* the record, recycled */
    CHECK_EQ(px_object_name(g, buf, sizeof buf), 0);
    CHECK_EQ(px_join(g, NULL), 0);
    px_fiber_release(g);
    return NULL;
}

SPEC(a_fiber_handle_name_goes_with_the_handle)
{
    CHECK_EQ(px_run(named_handle_main, NULL, NULL), 0);
}

/* The objects outside the sync family, which a park never names, are
** named all the same (a report of the program's own may print them). */
SPEC(every_handle_of_the_library_drops_its_name_when_freed)
{
    char buf[PX_NAME_MAX];
    px_timerq *q = px_timerq_new(NULL);
    px_queue *dq = px_queue_new();
    px_sched *s = px_sched_new(NULL);
    CHECK(q && dq && s);
    px_timer *t = px_timer_new(q);
    CHECK(t != NULL);
    const void *was[4] = { q, dq, s, t };
    for (int i = 0; i < 4; i++)
        CHECK_EQ(px_object_set_name(was[i], "named"), 0);
    px_timer_free(t);
    px_timerq_free(q);
    px_queue_free(dq);
    px_sched_free(s);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(px_object_name(was[i], buf, sizeof buf), 0);
}

/* -- the trace ---------------------------------------------------------------- */

static void *traced(void *arg)
{
    (void)arg;
    CHECK_EQ(px_fiber_set_name(0, "worker"), 0);
    CHECK_EQ(px_sleep(PX_MSEC(20)), 0);   /* long enough to park, under qemu too */
    return NULL;
}

static void *trace_main(void *arg)
{
    (void)arg;
    px_fiber *f = px_spawn(traced, NULL);
    CHECK(f != NULL);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    return NULL;
}

SPEC(trace_lines_carry_number_and_name)
{
    /* The trace is read once per process, by the first scheduler: this spec
    ** runs in a process of its own (ctest runs each spec so). */
    CHECK_EQ(setenv("PARATAXIS_TRACE", "1", 1), 0);
    FILE *tmp = tmpfile();
    CHECK(tmp != NULL);
    int saved = dup(2);
    CHECK(saved >= 0 && dup2(fileno(tmp), 2) == 2);
    int r = px_run(trace_main, NULL, NULL);
    CHECK(dup2(saved, 2) == 2);
    close(saved);
    CHECK_EQ(r, 0);
    static char text[65536];
    rewind(tmp);
    size_t n = fread(text, 1, sizeof text - 1, tmp);
    text[n] = '\0';
    fclose(tmp);
    CHECK(strstr(text, " fiber 2 spawn\n") != NULL);   /* unnamed when it was made */
    CHECK(strstr(text, " fiber 2 \"worker\" park \"sleep\"\n") != NULL);
    CHECK(strstr(text, " fiber 2 \"worker\" exit\n") != NULL);
    CHECK(strstr(text, " fiber 1 park \"fiber join\"\n") != NULL);
}

/* The trace spec first: run all in one process, it must make the first scheduler. */
SPECS(trace_lines_carry_number_and_name, reports_print_numbers_and_names,
      naming_an_unknown_or_ended_fiber_is_refused, numbers_count_from_one_in_each_run,
      an_object_name_goes_with_the_object, a_fiber_handle_name_goes_with_the_handle,
      every_handle_of_the_library_drops_its_name_when_freed)
