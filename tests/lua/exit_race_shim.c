/*
** exit_race_shim.c -- an LD_PRELOAD library for gc_spec.lua that forces one
** interleaving of the module's exit hook with a queue's worker: the worker
** takes a due timer out of its set, then waits 300 ms before it posts the call
** to the handler queue; the Lua thread, about to count what a queue owes at
** exit, waits 100 ms first, so that it counts inside that gap.
**
** The module (parataxis_core.so) is loaded with RTLD_LOCAL, so RTLD_NEXT does
** not find its functions: the shim looks them up in the module itself, named
** by the environment variable PX_SHIM_MODULE.  Its calls to the px_ API go
** through the PLT (the API has default visibility), so these definitions,
** preloaded, take their place.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef void (*handler_fn)(void *, int);

static void *real(const char *name)
{
    void *module = dlopen(getenv("PX_SHIM_MODULE"), RTLD_NOLOAD | RTLD_LAZY);
    void *fn = module != NULL ? dlsym(module, name) : NULL;
    if (fn == NULL)
        abort();
    return fn;
}

static void pause_ms(long ms)
{
    struct timespec ts = { ms / 1000, ms % 1000 * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int on_lua_thread(void)
{
    return gettid() == getpid();
}

int px_queue_post(void *q, handler_fn fn, void *arg, int status)
{
    int (*post)(void *, handler_fn, void *, int) = real("px_queue_post");
    if (!on_lua_thread())
        pause_ms(300);
    return post(q, fn, arg, status);
}

size_t px_timerq_pending(void *q)
{
    size_t (*pending)(void *) = real("px_timerq_pending");
    if (on_lua_thread())
        pause_ms(100);
    return pending(q);
}
