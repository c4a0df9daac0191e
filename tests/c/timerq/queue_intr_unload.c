/*
** queue_intr_unload.c -- a library unloaded while a thread that made
** interruptible waits lives on: the Lua module is dlclose'd with its state
** (lua_close), and libparataxis.so with it when nothing else holds it.  The
** thread then exits without calling into the unloaded library (the
** thread-specific destructor of its interrupt descriptor was code of it).
** argv[1] is the shared library; nothing else of it is linked here.
*/
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"   /* its macros call nothing of the library: no link needed */

typedef void *(*new_fn)(void);
typedef int (*wait_fn)(void *, int64_t);
typedef void (*free_fn)(void *);

static void *lib;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int waited, unloaded;

static void *waits_then_outlives(void *arg)
{
    (void)arg;
    void *q = ((new_fn)(uintptr_t)dlsym(lib, "px_queue_new"))();
    CHECK(q != NULL);
    CHECK(((wait_fn)(uintptr_t)dlsym(lib, "px_queue_wait_intr"))(q, 0) == 0);
    ((free_fn)(uintptr_t)dlsym(lib, "px_queue_free"))(q);
    pthread_mutex_lock(&m);
    waited = 1;
    pthread_cond_signal(&c);
    while (!unloaded)
        pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    return NULL;                 /* the thread ends with the library gone */
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, waits_then_outlives, NULL) == 0);
    pthread_mutex_lock(&m);
    while (!waited)
        pthread_cond_wait(&c, &m);
    CHECK(dlclose(lib) == 0);
    int gone = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD) == NULL;
    unloaded = 1;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(&m);
    CHECK(pthread_join(t, NULL) == 0);
    printf("timerq.queue_intr_unload: ok (the library %s)\n",
           gone ? "was unloaded" : "stayed loaded");
    return 0;
}
