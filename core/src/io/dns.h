/*
** dns.h -- what tests see of px_getaddrinfo's insides (dns.c): the lookup it
** runs on the pool, replaceable by one that blocks for as long as a test
** wants, and how many lookups still hold memory.
*/
#ifndef PX__IO_DNS_H
#define PX__IO_DNS_H

#include <stdatomic.h>
#include <stddef.h>

struct addrinfo;

/* The lookup a pool thread makes: getaddrinfo unless a test put another
** there (before any px_getaddrinfo call). */
extern int (*px__dns_lookup)(const char *node, const char *service,
                             const struct addrinfo *hints, struct addrinfo **res);

/* Lookups made and not yet freed: each is freed by its caller, or by the
** pool thread once abandoned. */
extern atomic_size_t px__dns_live;

#endif /* PX__IO_DNS_H */
