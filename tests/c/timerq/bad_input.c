/*
** bad_input -- every bad argument returns a code (never aborts, never calls the
** handler): NULL queue or handler, negative delays, zero or
** negative periods, unknown, stale and zero ids; plus px_strerror, px_version
** and the duration macros.
*/
#include <string.h>

#include "../spec.h"

static status_latch called;

static void on_timer(void *arg, int status)
{
    (void)arg;
    status_latch_set(&called, status);
}

static void test_adds(px_timerq *q)
{
    CHECK_EQ(px_timerq_add(NULL, 0, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add(q, 0, NULL, NULL), 0);
    CHECK_EQ(px_timerq_add(q, -1, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add(q, INT64_MIN, on_timer, NULL), 0);
    /* A delay past the clock's end saturates to "never": see durations.c. */
    CHECK_EQ(px_timerq_add_at(NULL, 0, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add_at(q, -1, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add_at(q, 0, NULL, NULL), 0);
    CHECK_EQ(px_timerq_add_periodic(NULL, 0, 1, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add_periodic(q, 0, 0, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add_periodic(q, 0, -5, on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add_periodic(q, -1, PX_MSEC(1), on_timer, NULL), 0);
    CHECK_EQ(px_timerq_add_periodic(q, 0, PX_MSEC(1), NULL, NULL), 0);
    CHECK_EQ(px_timerq_pending(q), 0);
    CHECK_EQ(px_timerq_pending(NULL), 0);
    CHECK_EQ(px_timerq_cancel_all(NULL), 0);
}

static void test_ids(px_timerq *q)
{
    CHECK_EQ(px_timerq_cancel(NULL, 1), PX_EINVAL);
    CHECK_EQ(px_timerq_cancel(q, 0), 0);
    CHECK_EQ(px_timerq_cancel(q, 12345), 0);
    CHECK_EQ(px_timerq_cancel(q, UINT64_MAX), 0);
    CHECK_EQ(px_timerq_cancel(q, (uint64_t)7 << 32 | 3), 0);

    uint64_t fired = px_timerq_add(q, 0, on_timer, NULL);       /* stale after firing */
    CHECK(fired != 0);
    EV_WAIT(&called.latch, 1);
    CHECK_EQ(called.status, 0);
    CHECK_EQ(px_timerq_cancel(q, fired), 0);                   /* cancel after fire */

    uint64_t cancelled = px_timerq_add(q, PX_SEC(10), on_timer, NULL);
    CHECK(cancelled != 0 && cancelled != fired);
    CHECK_EQ(px_timerq_cancel(q, cancelled), 1);
    EV_WAIT(&called.latch, 2);
    CHECK_EQ(called.status, PX_ECANCELED);
    CHECK_EQ(px_timerq_cancel(q, cancelled), 0);               /* stale after cancel */
    CHECK_EQ(px_timerq_cancel(q, fired), 0);
    CHECK_EQ(ev_count(&called.latch), 2);
}

static void test_strings(void)
{
    static const int codes[] = {
        PX_EINVAL, PX_ENOMEM, PX_ETIMEDOUT, PX_ECANCELED, PX_EDEADLK, PX_EPERM,
        PX_EBUSY, PX_EOWNERDEAD, PX_ENOFIBER, PX_EYIELD, PX_ECLOSED, PX_EFORKED,
        PX_ETHREAD, PX_EINTR, PX_ENOTSUP,
    };
    const char *unknown = px_strerror(-9999);
    CHECK(unknown != NULL);
    CHECK(strcmp(unknown, "unknown error") == 0);
    CHECK(strcmp(px_strerror(1), "unknown error") == 0);
    CHECK(strcmp(px_strerror(PX_ENOTSUP - 1), "unknown error") == 0);
    CHECK(strcmp(px_strerror(0), "success") == 0);
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *s = px_strerror(codes[i]);
        CHECK(s != NULL && *s != '\0');
        CHECK(strcmp(s, unknown) != 0);
        CHECK(strcmp(s, "success") != 0);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(s, px_strerror(codes[j])) != 0);      /* each has its own */
    }
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", PX_VERSION_MAJOR, PX_VERSION_MINOR, PX_VERSION_PATCH);
    CHECK(strcmp(px_version(), want) == 0);
    CHECK_EQ(PX_USEC(3), 3000);
    CHECK_EQ(PX_MSEC(3), 3000000);
    CHECK_EQ(PX_SEC(3), 3000000000LL);
    CHECK_EQ(PX_SEC(9000000000LL) / PX_SEC(1), 9000000000LL);   /* 64-bit, no int overflow */
    int64_t a = px_now(), b = px_now();
    CHECK(a > 0 && b >= a);
}

static px_timerq *q;

static void setup(void)
{
    status_latch_init(&called);
    q = px_timerq_new(NULL);
    CHECK(q != NULL);
}

/* How many handler calls the specs that ran owe (each counts in `called`). */
static int accepted;

static void teardown(void)
{
    px_timerq_free(q);
    CHECK_EQ(ev_count(&called.latch), accepted);   /* no rejected timer was ever called */
}

SPEC(bad_adds_are_refused)
{
    test_adds(q);
}

SPEC(bad_ids_are_refused)
{
    test_ids(q);
    accepted += 2;                           /* the one that fired, the one cancelled */
}

SPEC(strings_version_and_duration_macros)
{
    test_strings();
}

SPECS_AROUND(setup, teardown, bad_adds_are_refused, bad_ids_are_refused,
             strings_version_and_duration_macros)
