// bench_fiber.cc -- the fiber engine beside Boost.Fiber, in one process:
//   yield round trip (two fibers), spawn + join, resident memory per parked
//   fiber at 100,000, and 1,000,000 parked Parataxis fibers; then the same
//   Parataxis rows on shared stacks (px_sched_opts.shared_stacks); beside Go
//   (tests/bench/go) when run.sh names its program in PXB_GO (go_peer.h).
// Built by make bench (tests/bench/CMakeLists.txt); by hand, from a Release build:
//   c++ -O2 -std=c++17 -I core/include tests/bench/bench_fiber.cc
//       build-rel/libparataxis.a -lboost_fiber -lboost_context -lpthread -o bench_fiber
// Run: ./bench_fiber [parked fibers for the big run, default 1000000] [rounds, default 7]
// (it runs itself as `bench_fiber --shared-parked N [mutex]` for the shared-stack memory rows)
#include <boost/fiber/all.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
#include "parataxis.h"
}

#include "go_peer.h"

static long rss_kib()
{
    FILE *f = std::fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && std::fgets(line, sizeof line, f))
        if (std::strncmp(line, "VmRSS:", 6) == 0)
            kib = std::atol(line + 6);
    if (f)
        std::fclose(f);
    return kib;
}

static const long N_YIELD = 2000000, N_SPAWN = 200000;

// -- Parataxis ------------------------------------------------------------

static void *px_yielder(void *)
{
    for (long i = 0; i < N_YIELD; i++)
        px_yield();
    return nullptr;
}

static void *px_yield_main(void *out)
{
    px_fiber *a = px_spawn(px_yielder, nullptr), *b = px_spawn(px_yielder, nullptr);
    int64_t t0 = px_now();
    px_join(a, nullptr);
    px_join(b, nullptr);
    *(double *)out = double(px_now() - t0) / N_YIELD;   // one round trip = each yields once
    px_fiber_release(a);
    px_fiber_release(b);
    return nullptr;
}

static void *px_nothing(void *) { return nullptr; }

static void *px_spawn_main(void *out)
{
    int64_t t0 = px_now();
    for (long i = 0; i < N_SPAWN; i++) {
        px_fiber *f = px_spawn(px_nothing, nullptr);
        px_join(f, nullptr);
        px_fiber_release(f);
    }
    *(double *)out = double(px_now() - t0) / N_SPAWN;
    return nullptr;
}

struct park_ctx { long n; double kib_per; };

static void *px_parker(void *) { px_park("bench", nullptr, nullptr); return nullptr; }

static void *px_park_main(void *arg)
{
    park_ctx *c = (park_ctx *)arg;
    std::vector<px_fiber *> f(c->n);
    long before = rss_kib();
    for (long i = 0; i < c->n; i++)
        f[i] = px_spawn(px_parker, nullptr);   // the pool's default (64 KiB) size: slab stacks
    px_yield();                          // every one runs and parks
    c->kib_per = double(rss_kib() - before) / c->n;
    for (long i = 0; i < c->n; i++)
        px_wake(px_fiber_id(f[i]));
    for (long i = 0; i < c->n; i++) {
        px_join(f[i], nullptr);
        px_fiber_release(f[i]);
    }
    return nullptr;
}

// -- Parataxis on shared stacks (px_sched_opts.shared_stacks) ------------------
// The same bodies as above, on a scheduler whose default-size fibers share
// `stacks` stacks: with 1, every switch between two fibers copies their bytes.

static int px_run_shared(size_t stacks, px_fiber_fn fn, void *arg)
{
    px_sched_opts o;
    std::memset(&o, 0, sizeof o);
    o.shared_stacks = stacks;
    px_sched *s = px_sched_new(&o);
    if (s == nullptr)
        return PX_ENOMEM;
    int r = px_sched_post(s, fn, arg);
    if (r == 0)
        r = px_sched_run(s);
    px_sched_free(s);
    return r;
}

struct shared_rows {
    std::vector<double> yield1, yield2, spawn1;
};

static void shared_round(shared_rows &rows)
{
    double y1 = 0, y2 = 0, s1 = 0;
    px_run_shared(1, px_yield_main, &y1);   // one stack: a copy per switch
    px_run_shared(2, px_yield_main, &y2);   // the two yielders on two stacks
    px_run_shared(1, px_spawn_main, &s1);
    rows.yield1.push_back(y1);
    rows.yield2.push_back(y2);
    rows.spawn1.push_back(s1);
}

static double median(std::vector<double> v);

// N fibers waiting in px_mutex_lock for a mutex the main fiber holds.
static px_mutex *shared_mu;

static void *px_mutex_waiter(void *)
{
    px_mutex_lock(shared_mu);
    px_mutex_unlock(shared_mu);
    return nullptr;
}

static void *px_mutex_park_main(void *arg)
{
    park_ctx *c = (park_ctx *)arg;
    std::vector<px_fiber *> f(c->n);
    shared_mu = px_mutex_new();
    px_mutex_lock(shared_mu);
    long before = rss_kib();
    for (long i = 0; i < c->n; i++)
        f[i] = px_spawn(px_mutex_waiter, nullptr);
    px_yield();                          // every one runs and waits
    c->kib_per = double(rss_kib() - before) / c->n;
    px_mutex_unlock(shared_mu);
    for (long i = 0; i < c->n; i++) {
        px_join(f[i], nullptr);
        px_fiber_release(f[i]);
    }
    px_mutex_free(shared_mu);
    return nullptr;
}

// `bench_fiber --shared-parked N [mutex]`: N fibers parked (in px_park, or
// waiting for a mutex) on 4 shared stacks, in a process of their own.  A few
// hundred bytes a fiber is less than the memory the rounds before free into
// the allocator's arena, so measured after them the figure would count
// reused memory as free.
static int shared_parked_child(long n, bool mutex)
{
    park_ctx c = { n, 0 };
    int64_t t0 = px_now();
    int r = px_run_shared(4, mutex ? px_mutex_park_main : px_park_main, &c);
    std::printf("%ld fibers %s, 4 shared stacks: %s, %.0f bytes each, %.2f s in all\n", n,
                mutex ? "waiting for a mutex" : "parked", r == 0 ? "ok" : px_strerror(r),
                c.kib_per * 1024, double(px_now() - t0) / 1e9);
    return r != 0;
}

static void shared_report(shared_rows &rows, long big, const char *self)
{
    std::printf("== fibers on shared stacks (px_sched_opts.shared_stacks)\n");
    std::printf("yield round trip   1 shared stack  %7.1f ns   2 shared stacks %7.1f ns\n",
                median(rows.yield1), median(rows.yield2));
    std::printf("spawn + join       1 shared stack  %7.1f ns\n", median(rows.spawn1));
    std::fflush(stdout);
    const char *runs[][2] = { { "100000", "" }, { nullptr, "" }, { nullptr, " mutex" } };
    char big_s[32];
    std::snprintf(big_s, sizeof big_s, "%ld", big);
    for (auto &run : runs) {
        char cmd[4096];
        std::snprintf(cmd, sizeof cmd, "'%s' --shared-parked %s%s", self,
                      run[0] ? run[0] : big_s, run[1]);
        if (std::system(cmd) != 0)
            std::printf("shared stacks: failed (%s)\n", cmd);
    }
}

// -- Boost.Fiber ----------------------------------------------------------

static double bf_yield()
{
    auto t0 = std::chrono::steady_clock::now();
    boost::fibers::fiber a([] { for (long i = 0; i < N_YIELD; i++) boost::this_fiber::yield(); });
    boost::fibers::fiber b([] { for (long i = 0; i < N_YIELD; i++) boost::this_fiber::yield(); });
    a.join();
    b.join();
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / N_YIELD;
}

static double bf_spawn()
{
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < N_SPAWN; i++) {
        boost::fibers::fiber f([] {});
        f.join();
    }
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / N_SPAWN;
}

static double bf_park(long n)
{
    boost::fibers::mutex m;
    boost::fibers::condition_variable cv;
    bool go = false;
    std::vector<boost::fibers::fiber> f;
    f.reserve(n);
    long before = rss_kib();
    for (long i = 0; i < n; i++)
        f.emplace_back([&] { std::unique_lock<boost::fibers::mutex> l(m); cv.wait(l, [&] { return go; }); });
    boost::this_fiber::yield();
    double per = double(rss_kib() - before) / n;
    { std::unique_lock<boost::fibers::mutex> l(m); go = true; }
    cv.notify_all();
    for (auto &x : f)
        x.join();
    return per;
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// -- Go (tests/bench/go, GOMAXPROCS=1), when run.sh names it in PXB_GO --------

static void go_rows(go_peer &go, double py, const std::vector<double> &gy, double ps,
                    const std::vector<double> &gs, long parked, double kib_per)
{
    char req[32];
    std::snprintf(req, sizeof req, "parked %ld", parked);
    double gb = go.round(req);
    if (!go.running())
        return;
    std::printf("== fibers beside Go (goroutines, GOMAXPROCS=1; ratio parataxis / Go)\n");
    std::printf("yield round trip   parataxis %7.1f ns   go          %7.1f ns   ratio %.2f\n",
                py, median(gy), py / median(gy));
    std::printf("spawn + join       parataxis %7.1f ns   go          %7.1f ns   ratio %.2f\n",
                ps, median(gs), ps / median(gs));
    std::printf("RSS / parked fiber parataxis %7.0f B    go          %7.0f B    ratio %.2f  (%ld parked)\n",
                kib_per * 1024, gb, kib_per * 1024 / gb, parked);
}

int main(int argc, char **argv)
{
    if (argc > 2 && std::strcmp(argv[1], "--shared-parked") == 0)
        return shared_parked_child(std::atol(argv[2]), argc > 3 && !std::strcmp(argv[3], "mutex"));
    long big = argc > 1 ? std::atol(argv[1]) : 1000000;
    int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
    go_peer go;                          // Go's rounds interleave with ours too
    std::vector<double> py, by, ps, bs, gy, gs;
    shared_rows sr;
    for (int r = 0; r < rounds; r++) {   // interleaved, so that noise hits both
        shared_round(sr);
        double y = 0, s = 0;
        px_run(px_yield_main, &y, nullptr);
        py.push_back(y);
        by.push_back(bf_yield());
        px_run(px_spawn_main, &s, nullptr);
        ps.push_back(s);
        bs.push_back(bf_spawn());
        gy.push_back(go.round("yield"));
        gs.push_back(go.round("spawn"));
    }
    park_ctx pc = { 100000, 0 };
    px_run(px_park_main, &pc, nullptr);
    double bp = bf_park(100000);
    std::printf("== fibers, median of %d rounds\n", rounds);
    std::printf("yield round trip   parataxis %7.1f ns   boost.fiber %7.1f ns   ratio %.2f\n",
                median(py), median(by), median(py) / median(by));
    std::printf("spawn + join       parataxis %7.1f ns   boost.fiber %7.1f ns   ratio %.2f\n",
                median(ps), median(bs), median(ps) / median(bs));
    std::printf("RSS / parked fiber parataxis %7.2f KiB  boost.fiber %7.2f KiB  (100,000 parked)\n", pc.kib_per, bp);
    park_ctx big_c = { big, 0 };
    int64_t t0 = px_now();
    int r = px_run(px_park_main, &big_c, nullptr);
    std::printf("%ld parked parataxis fibers: %s, %.2f KiB each, %.2f s in all\n", big,
                r == 0 ? "ok" : px_strerror(r), big_c.kib_per, double(px_now() - t0) / 1e9);
    go_rows(go, median(py), gy, median(ps), gs, big, big_c.kib_per);
    shared_report(sr, big, argv[0]);
    return 0;
}
