/*
** names.c -- px_object_set_name: a chained hash table from an object's address
** to its name, under one lock (names are set and read rarely: a report, a
** dump, a free of a named object).  The table doubles when it holds more names
** than buckets, so a program that names a million objects and frees them
** pays O(1) per free.
*/
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parataxis.h"
#include "base/names.h"

typedef struct entry {
    struct entry *next;
    const void *object;
    char name[];
} entry;

atomic_size_t px__names_count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry **buckets;
static size_t nbuckets;
static pthread_once_t fork_watching = PTHREAD_ONCE_INIT;

/* A fork while another thread holds the lock would leave it locked in the
** child, and the table half changed: fork() waits for the lock instead. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

static void fork_after(void)
{
    pthread_mutex_unlock(&lock);
}

static void fork_watch(void)
{
    pthread_atfork(fork_prepare, fork_after, fork_after);
}

static size_t slot(const void *object, size_t n)
{
    uint64_t h = (uint64_t)(uintptr_t)object * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 32) & (n - 1);
}

/* The link that points at object's entry, or at the NULL ending its chain. */
static entry **find(const void *object)
{
    entry **p = &buckets[slot(object, nbuckets)];
    while (*p && (*p)->object != object)
        p = &(*p)->next;
    return p;
}

/* Room for one more name: the table doubles past one name per bucket.  A
** table that cannot grow stays as it is, only its chains get longer. */
static int make_room(void)
{
    size_t count = atomic_load_explicit(&px__names_count, memory_order_relaxed);
    if (nbuckets != 0 && count < nbuckets)
        return 0;
    size_t n = nbuckets ? nbuckets * 2 : 64;
    entry **b = calloc(n, sizeof *b);
    if (b == NULL)
        return nbuckets ? 0 : PX_ENOMEM;
    for (size_t i = 0; i < nbuckets; i++)
        for (entry *e = buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[slot(e->object, n)];
            b[slot(e->object, n)] = e;
        }
    free(buckets);
    buckets = b;
    nbuckets = n;
    return 0;
}

static void unlink_locked(entry **p)
{
    entry *e = *p;
    *p = e->next;
    free(e);
    atomic_fetch_sub_explicit(&px__names_count, 1, memory_order_relaxed);
}

int px_object_set_name(const void *object, const char *name)
{
    if (object == NULL)
        return PX_EINVAL;
    entry *e = NULL;
    if (name != NULL) {
        size_t len = px__names_length(name);
        if ((e = malloc(sizeof *e + len + 1)) == NULL)
            return PX_ENOMEM;
        e->object = object;
        memcpy(e->name, name, len);
        e->name[len] = '\0';
    }
    pthread_once(&fork_watching, fork_watch);   /* before the lock is ever taken */
    pthread_mutex_lock(&lock);
    int r = e ? make_room() : 0;
    if (r == 0 && nbuckets != 0) {
        entry **p = find(object);
        if (*p)
            unlink_locked(p);
        if (e) {
            e->next = buckets[slot(object, nbuckets)];
            buckets[slot(object, nbuckets)] = e;
            atomic_fetch_add_explicit(&px__names_count, 1, memory_order_relaxed);
            e = NULL;
        }
    }
    pthread_mutex_unlock(&lock);
    free(e);   /* not stored: no memory for the table */
    return r;
}

size_t px_object_name(const void *object, char *buf, size_t cap)
{
    size_t len = 0;
    if (cap != 0)
        buf[0] = '\0';
    if (atomic_load_explicit(&px__names_count, memory_order_relaxed) == 0 || object == NULL)
        return 0;
    pthread_mutex_lock(&lock);
    entry *e = nbuckets ? *find(object) : NULL;
    if (e && cap != 0) {
        len = strlen(e->name);
        if (len >= cap)
            len = cap - 1;
        memcpy(buf, e->name, len);
        buf[len] = '\0';
    }
    pthread_mutex_unlock(&lock);
    return len;
}

void px__names_forget_slow(const void *object)
{
    pthread_mutex_lock(&lock);
    if (nbuckets != 0) {
        entry **p = find(object);
        if (*p)
            unlink_locked(p);
    }
    pthread_mutex_unlock(&lock);
}
