/*
** dns.c -- px_getaddrinfo: one SPEC (one ctest io.<name>) per behaviour.  No
** network: "localhost", numeric hosts and a name under .invalid only; a slow
** lookup is a replaced lookup function (io/dns.h) that blocks on a latch.
*/
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "../spec.h"
#include "io/dns.h"

/* On a fiber: waits (1 ms sleeps) until cond holds; a hang fails the test. */
#define FIBER_WAIT_UNTIL(cond) do { \
    int64_t t0_ = px_now(); \
    while (!(cond)) { \
        CHECK(px_now() - t0_ < PX_TEST_TIMEOUT_NS); \
        CHECK_EQ(px_sleep(PX_MSEC(1)), 0); \
    } \
} while (0)

static int is_loopback(const struct addrinfo *ai)
{
    if (ai->ai_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ai->ai_addr;
        return ntohl(a->sin_addr.s_addr) >> 24 == 127;
    }
    if (ai->ai_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)ai->ai_addr;
        return memcmp(&a->sin6_addr, &in6addr_loopback, sizeof in6addr_loopback) == 0;
    }
    return 0;
}

static void *localhost_main(void *arg)
{
    (void)arg;
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    CHECK_EQ(px_getaddrinfo("localhost", "80", &hints, &res), 0);
    CHECK(res != NULL);
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        CHECK(is_loopback(ai));
        CHECK_EQ(ai->ai_socktype, SOCK_STREAM);
    }
    freeaddrinfo(res);
    return NULL;
}

SPEC(dns_localhost_resolves_to_loopback)
{
    CHECK_EQ(px_run(localhost_main, NULL, NULL), 0);
    CHECK_EQ(atomic_load(&px__dns_live), 0);
}

static void *numeric_main(void *arg)
{
    (void)arg;
    struct addrinfo hints = { .ai_family = AF_INET, .ai_flags = AI_NUMERICHOST,
                              .ai_socktype = SOCK_DGRAM };
    struct addrinfo *res = NULL;
    CHECK_EQ(px_getaddrinfo("192.0.2.7", "5353", &hints, &res), 0);
    CHECK(res != NULL && res->ai_family == AF_INET);
    const struct sockaddr_in *a = (const void *)res->ai_addr;
    CHECK_EQ(ntohl(a->sin_addr.s_addr), 0xC0000207u);
    CHECK_EQ(ntohs(a->sin_port), 5353);
    freeaddrinfo(res);
    /* hints NULL, a numeric IPv6 host and no service */
    CHECK_EQ(px_getaddrinfo("::1", NULL, NULL, &res), 0);
    CHECK(res != NULL && res->ai_family == AF_INET6 && is_loopback(res));
    freeaddrinfo(res);
    return NULL;
}

SPEC(dns_numeric_hosts_resolve)
{
    CHECK_EQ(px_run(numeric_main, NULL, NULL), 0);
}

static void *invalid_main(void *arg)
{
    (void)arg;
    struct addrinfo *res = NULL;
    int r = px_getaddrinfo("no-such-host.invalid", "80", NULL, &res);
    CHECK(r == EAI_NONAME || r == EAI_AGAIN);
    r = px_getaddrinfo("not-a-number", NULL,
                       &(struct addrinfo){ .ai_flags = AI_NUMERICHOST }, &res);
    CHECK_EQ(r, EAI_NONAME);
    return NULL;
}

SPEC(dns_an_invalid_name_fails_with_getaddrinfos_code)
{
    CHECK_EQ(px_run(invalid_main, NULL, NULL), 0);
    CHECK_EQ(atomic_load(&px__dns_live), 0);
}

SPEC(dns_off_fiber_calls_getaddrinfo)
{
    struct addrinfo *res = NULL;
    CHECK_EQ(px_getaddrinfo("127.0.0.1", "7", NULL, &res), 0);
    CHECK(res != NULL && is_loopback(res));
    freeaddrinfo(res);
}

/* -- a slow lookup, abandoned ----------------------------------------------------- */

static px_latch slow_gate, slow_started;
static char slow_node[64];

/* Blocks until the gate opens, then looks up what it was asked: the copies of
** node and hints it reads must still be there. */
static int slow_lookup(const char *node, const char *service, const struct addrinfo *hints,
                       struct addrinfo **res)
{
    strncpy(slow_node, node ? node : "", sizeof slow_node - 1);
    ev_set(&slow_started);
    CHECK(ev_wait_n(&slow_gate, 1));
    return getaddrinfo(node, service, hints, res);
}

typedef struct slow_call {
    px_token *tok;               /* NULL: a timeout scope */
    int rc, err;
} slow_call;

static int slow_body(void *arg)
{
    slow_call *c = arg;
    /* node, service and hints on this frame: gone once the call returns */
    char node[] = "127.0.0.1", service[] = "80";
    struct addrinfo hints = { .ai_flags = AI_NUMERICHOST };
    struct addrinfo *res = (void *)1;
    c->rc = px_getaddrinfo(node, service, &hints, &res);
    c->err = errno;
    memset(node, 'x', sizeof node - 1);
    CHECK(res == (void *)1);
    return c->rc;
}

static void *slow_main(void *arg)
{
    slow_call *c = arg;
    if (c->tok) {
        CHECK_EQ(px_with_cancel(c->tok, slow_body, c), EAI_SYSTEM);
    } else {
        CHECK_EQ(px_with_timeout(PX_MSEC(200), slow_body, c), EAI_SYSTEM);
        if (ev_count(&slow_started) == 0) {
            /* Fired before a thread took it: dequeued, freed, never run. */
            CHECK_EQ(atomic_load(&px__dns_live), 0);
            ev_set(&slow_gate);
            return NULL;
        }
    }
    CHECK_EQ(atomic_load(&px__dns_live), 1);   /* the lookup runs on */
    ev_set(&slow_gate);
    FIBER_WAIT_UNTIL(atomic_load(&px__dns_live) == 0);   /* and frees itself */
    CHECK(strcmp(slow_node, "127.0.0.1") == 0);
    return NULL;
}

static void *cancel_later(void *arg)
{
    slow_call *c = arg;
    FIBER_WAIT_UNTIL(ev_count(&slow_started) == 1);
    CHECK_EQ(px_token_cancel(c->tok), 1);
    return NULL;
}

static void *slow_cancel_main(void *arg)
{
    px_fiber *f = px_spawn(cancel_later, arg);
    CHECK(f != NULL);
    slow_main(arg);
    CHECK_EQ(px_join(f, NULL), 0);
    px_fiber_release(f);
    return NULL;
}

SPEC(dns_a_scope_that_fires_abandons_a_slow_lookup_which_frees_itself)
{
    px__dns_lookup = slow_lookup;
    ev_init(&slow_gate);
    ev_init(&slow_started);
    slow_call t = { 0 };
    CHECK_EQ(px_run(slow_main, &t, NULL), 0);
    CHECK_EQ(t.rc, EAI_SYSTEM);
    CHECK_EQ(t.err, ETIMEDOUT);

    ev_destroy(&slow_gate);
    ev_destroy(&slow_started);
    ev_init(&slow_gate);
    ev_init(&slow_started);
    slow_call c = { 0 };
    CHECK((c.tok = px_token_new()) != NULL);
    CHECK_EQ(px_run(slow_cancel_main, &c, NULL), 0);
    CHECK_EQ(c.rc, EAI_SYSTEM);
    CHECK_EQ(c.err, ECANCELED);
    px_token_free(c.tok);
    px__dns_lookup = getaddrinfo;
}

SPECS(dns_localhost_resolves_to_loopback,
      dns_numeric_hosts_resolve,
      dns_an_invalid_name_fails_with_getaddrinfos_code,
      dns_off_fiber_calls_getaddrinfo,
      dns_a_scope_that_fires_abandons_a_slow_lookup_which_frees_itself)
