// bench_sync.cc -- the synchronization family beside Boost.Fiber, in one run:
//
//   uncontended    lock + unlock by one fiber, beside a plain call pair (two
//                  opaque calls that set and clear a flag), Boost.Fiber's
//                  mutex and an uncontended pthread mutex;
//   hand-off       two fibers taking turns on one mutex, per hand-off: ours by
//                  direct hand-off (unlock gives the lock to the waiter), Boost's
//                  with a mutex and a condition variable (its mutex lets the
//                  unlocker barge back in, so turns need the condvar), and two
//                  threads with pthread mutex + condvar for reference;
//   channel        send + recv between a producer and a consumer fiber, per
//                  value: buffered (capacity 64) beside buffered_channel(64),
//                  unbuffered beside unbuffered_channel.
//
// Each figure is the median of ROUNDS rounds; ratios are ours / theirs.  Go's
// rows (tests/bench/go: sync.Mutex, sync.Mutex + sync.Cond turns, channels)
// follow when run.sh names its program in PXB_GO (go_peer.h); its rounds
// interleave with ours.
// Run: build-bench/tests/bench/bench_sync [rounds]
#include <boost/fiber/all.hpp>

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" {
#include "parataxis.h"
}

#include "go_peer.h"

static const long N_LOCK = 5000000, N_HANDOFF = 500000, N_CHAN = 1000000;

static double now_ns()
{
    return std::chrono::duration<double, std::nano>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// -- uncontended -------------------------------------------------------------

// The plain call pair is what px_mutex_lock + px_mutex_unlock would cost if
// they did nothing but set and clear a word: the same calls, made the same
// way.  This program links parataxis_static, so the mutex calls are direct
// calls into another object file (no PLT), and the caller knows nothing of
// the callee; the baseline is made the same: each function takes the address
// of the word it sets, as the mutex functions take m, and is opaque to the
// caller (GCC's noipa: no inlining, and no interprocedural register
// allocation, which would let the loop keep its counter in a register the
// callee is known not to touch -- something a call into the library cannot
// do).  Clang does no interprocedural register allocation by default.
#if defined(__GNUC__) && !defined(__clang__)
#  define PXB_OPAQUE __attribute__((noipa))
#else
#  define PXB_OPAQUE __attribute__((noinline))
#endif
static volatile int flag;
PXB_OPAQUE static void plain_on(volatile int *p) { *p = 1; }
PXB_OPAQUE static void plain_off(volatile int *p) { *p = 0; }

static double plain_pair()
{
    double t0 = now_ns();
    for (long i = 0; i < N_LOCK; i++) {
        plain_on(&flag);
        plain_off(&flag);
    }
    return (now_ns() - t0) / N_LOCK;
}

static void *px_uncontended(void *out)
{
    px_mutex *m = px_mutex_new();
    double t0 = now_ns();
    for (long i = 0; i < N_LOCK; i++) {
        px_mutex_lock(m);
        px_mutex_unlock(m);
    }
    *(double *)out = (now_ns() - t0) / N_LOCK;
    px_mutex_free(m);
    return nullptr;
}

static double bf_uncontended()
{
    double r = 0;
    boost::fibers::fiber f([&] {
        boost::fibers::mutex m;
        double t0 = now_ns();
        for (long i = 0; i < N_LOCK; i++) {
            m.lock();
            m.unlock();
        }
        r = (now_ns() - t0) / N_LOCK;
    });
    f.join();
    return r;
}

static double pthread_uncontended()
{
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    double t0 = now_ns();
    for (long i = 0; i < N_LOCK; i++) {
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
    }
    return (now_ns() - t0) / N_LOCK;
}

// -- hand-off ----------------------------------------------------------------

struct px_turns { px_mutex *m; };

static void *px_taker(void *arg)
{
    px_mutex *m = ((px_turns *)arg)->m;
    for (long i = 0; i < N_HANDOFF; i++) {
        px_mutex_lock(m);      // parks: the other fiber holds it
        px_mutex_unlock(m);    // hands it to the other fiber, which waits
    }
    return nullptr;
}

static void *px_handoff(void *out)
{
    px_turns t = { px_mutex_new() };
    px_mutex_lock(t.m);
    px_fiber *a = px_spawn(px_taker, &t), *b = px_spawn(px_taker, &t);
    px_yield();                // both queue on the mutex
    double t0 = now_ns();
    px_mutex_unlock(t.m);      // the turns begin
    px_join(a, nullptr);
    px_join(b, nullptr);
    *(double *)out = (now_ns() - t0) / (2.0 * N_HANDOFF);
    px_fiber_release(a);
    px_fiber_release(b);
    px_mutex_free(t.m);
    return nullptr;
}

template <class Mutex, class Cond, class Lock>
struct turns {
    Mutex m;
    Cond c;
    int turn = 0;
    void take(int me)
    {
        for (long i = 0; i < N_HANDOFF; i++) {
            Lock l(m);
            c.wait(l, [&] { return turn == me; });
            turn = 1 - me;
            c.notify_one();
        }
    }
};

static double bf_handoff()
{
    turns<boost::fibers::mutex, boost::fibers::condition_variable,
          std::unique_lock<boost::fibers::mutex>> t;
    double t0 = now_ns();
    boost::fibers::fiber a([&] { t.take(0); }), b([&] { t.take(1); });
    a.join();
    b.join();
    return (now_ns() - t0) / (2.0 * N_HANDOFF);
}

struct pt_turns {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    int turn = 0;
};
struct pt_arg { pt_turns *t; int me; long n; };

static void *pt_take(void *p)
{
    pt_arg *a = (pt_arg *)p;
    for (long i = 0; i < a->n; i++) {
        pthread_mutex_lock(&a->t->m);
        while (a->t->turn != a->me)
            pthread_cond_wait(&a->t->c, &a->t->m);
        a->t->turn = 1 - a->me;
        pthread_cond_signal(&a->t->c);
        pthread_mutex_unlock(&a->t->m);
    }
    return nullptr;
}

static double pthread_handoff()
{
    const long n = N_HANDOFF / 10;   // a thread hand-off costs a futex wake
    pt_turns t;
    pt_arg a0 = { &t, 0, n }, a1 = { &t, 1, n };
    pthread_t x, y;
    double t0 = now_ns();
    pthread_create(&x, nullptr, pt_take, &a0);
    pthread_create(&y, nullptr, pt_take, &a1);
    pthread_join(x, nullptr);
    pthread_join(y, nullptr);
    return (now_ns() - t0) / (2.0 * n);
}

// -- channel -----------------------------------------------------------------

static void *px_producer(void *ch)
{
    for (long i = 0; i < N_CHAN; i++)
        px_chan_send((px_chan *)ch, (void *)(intptr_t)(i + 1));
    return nullptr;
}

static void *px_consumer(void *ch)
{
    long sum = 0;
    void *v = nullptr;
    for (long i = 0; i < N_CHAN; i++) {
        px_chan_recv((px_chan *)ch, &v);
        sum += (long)(intptr_t)v;
    }
    if (sum != N_CHAN * (N_CHAN + 1) / 2)
        std::abort();
    return nullptr;
}

static size_t chan_cap;

static void *px_channel(void *out)
{
    px_chan *ch = px_chan_new(chan_cap);
    double t0 = now_ns();
    px_fiber *p = px_spawn(px_producer, ch), *c = px_spawn(px_consumer, ch);
    px_join(p, nullptr);
    px_join(c, nullptr);
    *(double *)out = (now_ns() - t0) / N_CHAN;
    px_fiber_release(p);
    px_fiber_release(c);
    px_chan_free(ch);
    return nullptr;
}

template <class Chan>
static double bf_channel(Chan &ch)
{
    double t0 = now_ns();
    boost::fibers::fiber p([&] {
        for (long i = 0; i < N_CHAN; i++)
            ch.push(i + 1);
    });
    boost::fibers::fiber c([&] {
        long sum = 0, v = 0;
        for (long i = 0; i < N_CHAN; i++) {
            ch.pop(v);
            sum += v;
        }
        if (sum != N_CHAN * (N_CHAN + 1) / 2)
            std::abort();
    });
    p.join();
    c.join();
    return (now_ns() - t0) / N_CHAN;
}

// ----------------------------------------------------------------------------

static double px_round(px_fiber_fn fn)
{
    double r = 0;
    if (px_run(fn, &r, nullptr) != 0)
        std::abort();
    return r;
}

static void row(const char *what, double ours, const char *peer, double theirs)
{
    std::printf("%-24s parataxis %7.1f ns   %-22s %7.1f ns   ratio %.2f\n",
                what, ours, peer, theirs, ours / theirs);
}

// A Go row (tests/bench/go, GOMAXPROCS=1), when run.sh names it in PXB_GO.
static void go_row(const go_peer &go, const char *what, double ours, const char *peer,
                   const std::vector<double> &theirs)
{
    if (go.running())
        row(what, ours, peer, median(theirs));
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
    std::vector<double> pu, pl, bu, tu, ph, bh, th, pc, bc, pz, bz;
    go_peer go;                              // Go's rounds interleave with ours too
    std::vector<double> gu, gh, gc, gz;
    for (int r = 0; r < rounds; r++) {
        pu.push_back(px_round(px_uncontended));
        pl.push_back(plain_pair());
        bu.push_back(bf_uncontended());
        tu.push_back(pthread_uncontended());
        ph.push_back(px_round(px_handoff));
        bh.push_back(bf_handoff());
        th.push_back(pthread_handoff());
        chan_cap = 64;
        pc.push_back(px_round(px_channel));
        boost::fibers::buffered_channel<long> bch(64);
        bc.push_back(bf_channel(bch));
        chan_cap = 0;
        pz.push_back(px_round(px_channel));
        boost::fibers::unbuffered_channel<long> uch;
        bz.push_back(bf_channel(uch));
        gu.push_back(go.round("lock"));
        gh.push_back(go.round("handoff"));
        gc.push_back(go.round("chan64"));
        gz.push_back(go.round("chan0"));
    }
    std::printf("== sync family, median of %d rounds\n", rounds);
    row("uncontended lock+unlock", median(pu), "plain call pair", median(pl));
    row("uncontended lock+unlock", median(pu), "boost.fiber mutex", median(bu));
    row("uncontended lock+unlock", median(pu), "pthread mutex", median(tu));
    row("mutex hand-off", median(ph), "boost.fiber mutex+cv", median(bh));
    row("mutex hand-off", median(ph), "pthread 2 threads+cv", median(th));
    row("channel cap 64", median(pc), "buffered_channel(64)", median(bc));
    row("channel unbuffered", median(pz), "unbuffered_channel", median(bz));
    go_row(go, "uncontended lock+unlock", median(pu), "go sync.Mutex", gu);
    go_row(go, "mutex hand-off", median(ph), "go sync.Mutex+Cond", gh);
    go_row(go, "channel cap 64", median(pc), "go chan, cap 64", gc);
    go_row(go, "channel unbuffered", median(pz), "go chan, unbuffered", gz);
    return 0;
}
