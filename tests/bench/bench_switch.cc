// Raw context switch round trip (there and back again), one process:
// parataxis's configured backend, parataxis's ucontext backend (a second
// copy with renamed symbols), Boost.Context's fiber, and bare swapcontext.
// Prints the median of repeats per implementation and the ratios.
//   bench_switch [iterations] [repeats]       all implementations
//   bench_switch --only NAME iterations       one, for callgrind
#include <ucontext.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <boost/context/fiber.hpp>

extern "C" {
#include "fiber/ctx/context.h"
#include "fiber/stack.h"
// The ucontext backend again, compiled with every symbol prefixed pxu_.
void pxu_context_init_thread(px__context *c);
int pxu_context_make(px__context *c, void *lo, size_t size, void (*entry)(void *), void *arg);
void pxu_context_switch(px__context *from, px__context *to);
void pxu_context_destroy(px__context *c);
}

namespace
{

using Clock = std::chrono::steady_clock;

// ---- parataxis (configured backend) ----
px__context px_main, px_fib;
void px_bounce(void *)
{
    for (;;)
        px__context_switch(&px_fib, &px_main);
}
double run_px(long n)
{
    static px__stack_pool *pool = px__stack_pool_new(64 * 1024);
    px__stack s;
    if (px__stack_get(pool, 0, &s) != 0)
        std::abort();
    px__context_init_thread(&px_main);
    px__context_make(&px_fib, s.lo, s.size, px_bounce, nullptr);
    px__context_switch(&px_main, &px_fib);   // warm: first entry
    auto t0 = Clock::now();
    for (long i = 0; i < n; i++)
        px__context_switch(&px_main, &px_fib);
    auto t1 = Clock::now();
    px__context_destroy(&px_fib);
    px__stack_put(pool, &s);
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

// ---- parataxis ucontext backend ----
px__context pxu_main, pxu_fib;
void pxu_bounce(void *)
{
    for (;;)
        pxu_context_switch(&pxu_fib, &pxu_main);
}
double run_pxu(long n)
{
    static std::vector<char> stack(64 * 1024);
    pxu_context_init_thread(&pxu_main);
    pxu_context_make(&pxu_fib, stack.data(), stack.size(), pxu_bounce, nullptr);
    pxu_context_switch(&pxu_main, &pxu_fib);
    auto t0 = Clock::now();
    for (long i = 0; i < n; i++)
        pxu_context_switch(&pxu_main, &pxu_fib);
    auto t1 = Clock::now();
    pxu_context_destroy(&pxu_fib);
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

// ---- Boost.Context fiber (fcontext) ----
double run_boost(long n)
{
    namespace ctx = boost::context;
    ctx::fiber f{ [](ctx::fiber &&sink) {
        for (;;)
            sink = std::move(sink).resume();
        return std::move(sink);
    } };
    f = std::move(f).resume();
    auto t0 = Clock::now();
    for (long i = 0; i < n; i++)
        f = std::move(f).resume();
    auto t1 = Clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

// ---- bare swapcontext ----
ucontext_t uc_main, uc_fib;
void uc_bounce()
{
    for (;;)
        swapcontext(&uc_fib, &uc_main);
}
double run_uc(long n)
{
    static std::vector<char> stack(64 * 1024);
    getcontext(&uc_fib);
    uc_fib.uc_stack.ss_sp = stack.data();
    uc_fib.uc_stack.ss_size = stack.size();
    uc_fib.uc_link = nullptr;
    makecontext(&uc_fib, uc_bounce, 0);
    swapcontext(&uc_main, &uc_fib);
    auto t0 = Clock::now();
    for (long i = 0; i < n; i++)
        swapcontext(&uc_main, &uc_fib);
    auto t1 = Clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

struct Impl {
    const char *name;
    double (*run)(long);
    long scale;   // divide iterations: the syscall-bound ones are 200x slower
};

const Impl impls[] = {
    { "parataxis", run_px, 1 },
    { "parataxis-ucontext", run_pxu, 100 },
    { "boost-fiber", run_boost, 1 },
    { "swapcontext", run_uc, 100 },
};

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}   // namespace

int main(int argc, char **argv)
{
    if (argc == 4 && std::strcmp(argv[1], "--only") == 0) {
        for (const Impl &im : impls)
            if (im.name == std::string(argv[2])) {
                im.run(std::atol(argv[3]));
                return 0;
            }
        std::fprintf(stderr, "no implementation %s\n", argv[2]);
        return 2;
    }
    long n = argc > 1 ? std::atol(argv[1]) : 2000000;
    int reps = argc > 2 ? std::atoi(argv[2]) : 11;
    double med[4];
    std::printf("round trip (two switches), median of %d repeats; %s backend built in\n", reps,
                px__ctx_backend());
    // Repeats interleave the implementations, so load from elsewhere on a
    // noisy machine spreads over all of them rather than hitting one.
    std::vector<double> v[4];
    long it[4];
    for (int k = 0; k < 4; k++)
        it[k] = std::max(1000L, n / impls[k].scale);
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 4; k++)
            v[k].push_back(impls[k].run(it[k]));
    for (int k = 0; k < 4; k++) {
        med[k] = median(v[k]);
        std::printf("  %-20s %9.2f ns  (%ld round trips x %d)\n", impls[k].name, med[k], it[k],
                    reps);
    }
    std::printf("ratio parataxis / boost-fiber          = %.2f  (target <= 1.5)\n",
                med[0] / med[2]);
    std::printf("ratio parataxis-ucontext / swapcontext = %.2f\n", med[1] / med[3]);
    std::printf("ratio swapcontext / parataxis          = %.1f\n", med[3] / med[0]);
    return 0;
}
