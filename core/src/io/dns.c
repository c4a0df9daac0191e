/*
** dns.c -- px_getaddrinfo: getaddrinfo on the blocking pool (io/pool.c),
** abandoned when a scope fires.  A lookup's record holds copies of node,
** service and hints, so that it owes nothing to the caller's memory once
** abandoned; whichever side is last -- the caller collecting it, or the pool
** thread releasing an abandoned one -- frees the record and what it found.
*/
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "parataxis.h"
#include "io/dns.h"
#include "io/pool.h"

int (*px__dns_lookup)(const char *node, const char *service, const struct addrinfo *hints,
                      struct addrinfo **res) = getaddrinfo;

atomic_size_t px__dns_live;

typedef struct lookup {
    char *node, *service;        /* copies, or NULL */
    struct addrinfo hints;
    int has_hints;
    struct addrinfo *res;
    int code;                    /* what getaddrinfo returned */
    int err;                     /* its errno, for EAI_SYSTEM */
} lookup;

static void lookup_free(lookup *l)
{
    free(l->node);
    free(l->service);
    free(l);
    atomic_fetch_sub(&px__dns_live, 1);
}

static char *copy(const char *s, int *failed)
{
    if (s == NULL)
        return NULL;
    char *c = strdup(s);
    if (c == NULL)
        *failed = 1;
    return c;
}

static lookup *lookup_new(const char *node, const char *service, const struct addrinfo *hints)
{
    lookup *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    atomic_fetch_add(&px__dns_live, 1);
    int failed = 0;
    l->node = copy(node, &failed);
    l->service = copy(service, &failed);
    if (failed) {
        lookup_free(l);
        return NULL;
    }
    if (hints) {
        /* What getaddrinfo reads of hints; the rest must be 0 / NULL. */
        l->hints.ai_flags = hints->ai_flags;
        l->hints.ai_family = hints->ai_family;
        l->hints.ai_socktype = hints->ai_socktype;
        l->hints.ai_protocol = hints->ai_protocol;
        l->has_hints = 1;
    }
    return l;
}

static void *run(void *arg)
{
    lookup *l = arg;
    l->code = px__dns_lookup(l->node, l->service, l->has_hints ? &l->hints : NULL, &l->res);
    l->err = errno;
    return l;
}

/* The pool's release: an abandoned lookup (result: l), or one dequeued
** before it ran (NULL). */
static void release(void *arg, void *result)
{
    lookup *l = arg;
    if (result != NULL && l->code == 0 && l->res != NULL)
        freeaddrinfo(l->res);
    lookup_free(l);
}

int px_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                   struct addrinfo **res)
{
    if (px_self() == 0)
        return getaddrinfo(node, service, hints, res);
    lookup *l = px__pool_recorded(run);   /* a hosted fiber's call again */
    if (l == NULL && (l = lookup_new(node, service, hints)) == NULL)
        return EAI_MEMORY;
    void *out;
    int r = px_run_blocking(run, l, release, PX_BLOCKING_ABANDON, &out);
    switch (r) {
    case 0: {
        int code = l->code;
        if (code == 0)
            *res = l->res;
        else if (code == EAI_SYSTEM)
            errno = l->err;
        lookup_free(l);
        return code;
    }
    case PX_ETIMEDOUT:
    case PX_ECANCELED:
        errno = r == PX_ETIMEDOUT ? ETIMEDOUT : ECANCELED;
        return EAI_SYSTEM;         /* release() frees l */
    case PX_EYIELD:
        errno = EAGAIN;
        return EAI_SYSTEM;         /* recorded: the call again collects it */
    case PX_EFORKED:
        lookup_free(l);
        return getaddrinfo(node, service, hints, res);
    default:                       /* PX_ENOMEM */
        lookup_free(l);
        return EAI_MEMORY;
    }
}
