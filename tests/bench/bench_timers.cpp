// bench_timers.cpp -- parataxis px_timerq against libuv, Boost.Asio and a naive
// ordered-set queue, side by side in one process, in interleaved rounds.
//
//   bench_timers [ops|cold|lateness|all] [only_n]
//
// Each figure is the median of the measured rounds; a warm-up round runs first
// and is not counted, so that every peer that reuses memory (parataxis records,
// malloc'd Asio ops and naive nodes) finds its memory already faulted in.  libuv
// handles, Asio steady_timer objects and the id vectors of parataxis and the naive
// peer are caller memory: they are preallocated and initialised (touched) before
// any round, and counted per timer as caller bytes.  parataxis keeps its records
// in mmap'd arenas that mallinfo2 does not see: only the rss rows count them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <malloc.h>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "parataxis.h"
#ifdef PXB_HAVE_UV
#include <uv.h>
#endif
#ifdef PXB_HAVE_ASIO
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#endif

namespace {

// -- helpers ----------------------------------------------------------------

struct Rng {   // splitmix64: seeded, so every run draws the same delays
    uint64_t s;
    uint64_t next()
    {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    int64_t range(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }
};

double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

size_t heap_bytes()
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

size_t rss_bytes()
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (size_t)rss * 4096;
}

// Per-timer growth from a to b; signed, as a round may also give pages back.
double per_timer(size_t a, size_t b, size_t n)
{
    return (double)((int64_t)b - (int64_t)a) / (double)n;
}

void wait_for(const std::atomic<size_t> &count, size_t n)
{
    while (count.load(std::memory_order_acquire) < n)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
}

// A permutation of 0..n-1 (random cancel order).
std::vector<uint32_t> shuffled(size_t n, uint64_t seed)
{
    std::vector<uint32_t> p(n);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint32_t)i;
    Rng r{seed};
    for (size_t i = n - 1; i > 0; i--)
        std::swap(p[i], p[r.next() % (i + 1)]);
    return p;
}

const int64_t FAR_LO = PX_SEC(10), FAR_HI = PX_SEC(20);   // never due during a round

// One peer: the same five phases, timed by the caller.
struct Peer {
    std::string name;
    virtual ~Peer() = default;
    virtual void add(const std::vector<int64_t> &delays) = 0;       // all N, far deadlines
    virtual void cancel(const std::vector<uint32_t> &order) = 0;    // cancels order[i]
    // The same cancels with what names each timer (an id, a handle's address)
    // laid out in cancel order by prepare (untimed), so that cancel_prepared pays
    // for the library's own memory only: false if not offered.
    virtual bool prepare(const std::vector<uint32_t> &) { return false; }
    virtual void cancel_prepared() {}
    virtual void settle() {}                                        // untimed: drain cancels
    virtual size_t cancel_limit() const { return SIZE_MAX; }        // cancels timed per pass
    virtual size_t caller_bytes() const { return 0; }               // per timer, not malloc'd
    virtual bool malloc_sees_records() const { return true; }       // false: mmap'd elsewhere
    // As add, with absolute deadlines computed by the caller; false if not offered.
    virtual bool add_at(const std::vector<int64_t> &) { return false; }
    // Arms N timers due in [t0, t0 + window] and returns when the last handler ran.
    virtual int64_t expire(const std::vector<int64_t> &deadlines) = 0;
    // Fires the timers of delays and stores (fire - due) per timer.
    virtual void lateness(const std::vector<int64_t> &delays, std::vector<int64_t> &late) = 0;
};

// -- parataxis --------------------------------------------------------------

std::atomic<size_t> g_px_calls{0};
std::atomic<int64_t> g_px_last{0};
size_t g_px_target = 0;

void px_count(void *, int)
{
    g_px_calls.fetch_add(1, std::memory_order_acq_rel);
}

void px_count_last(void *, int)
{
    if (g_px_calls.fetch_add(1, std::memory_order_acq_rel) + 1 == g_px_target)
        g_px_last.store(px_now(), std::memory_order_release);
}

// The lateness round blocks until its last handler ran, as Asio's and libuv's
// run() do: a caller polling every 200 us would compete with the worker for
// the two cores and show in the worker's p99.
std::mutex g_stamp_lock;
std::condition_variable g_stamp_done;

void px_stamp(void *arg, int)
{
    *(int64_t *)arg = px_now();
    if (g_px_calls.fetch_add(1, std::memory_order_acq_rel) + 1 == g_px_target) {
        std::lock_guard<std::mutex> g(g_stamp_lock);
        g_stamp_done.notify_one();
    }
}

struct PxPeer : Peer {
    px_timerq *q;
    std::vector<uint64_t> ids;   // caller memory: sized and zeroed (touched) up front
    size_t owed = 0;   // handler calls we wait for in settle()
    PxPeer(size_t n, int64_t slack, const char *label) : ids(n)
    {
        name = label;
        px_timerq_opts o{};
        o.timer_slack_ns = slack;
        q = px_timerq_new(&o);
    }
    ~PxPeer() override { px_timerq_free(q); }
    size_t caller_bytes() const override { return sizeof(uint64_t); }
    bool malloc_sees_records() const override { return false; }   // 2 MiB mmap'd arenas
    void add(const std::vector<int64_t> &d) override
    {
        ids.resize(d.size());   // no-op: sized by the constructor
        for (size_t i = 0; i < d.size(); i++)
            ids[i] = px_timerq_add(q, d[i], px_count, nullptr);
    }
    // The add without its clock read (px_now() is a clock_gettime, ~46 ns here).
    bool add_at(const std::vector<int64_t> &dl) override
    {
        ids.resize(dl.size());   // no-op, as in add
        for (size_t i = 0; i < dl.size(); i++)
            ids[i] = px_timerq_add_at(q, dl[i], px_count, nullptr);
        return true;
    }
    void cancel(const std::vector<uint32_t> &order) override
    {
        for (uint32_t i : order)
            px_timerq_cancel(q, ids[i]);
        owed += order.size();
    }
    std::vector<uint64_t> ordered;
    bool prepare(const std::vector<uint32_t> &order) override
    {
        ordered.resize(order.size());
        for (size_t k = 0; k < order.size(); k++)
            ordered[k] = ids[order[k]];
        return true;
    }
    void cancel_prepared() override
    {
        for (uint64_t id : ordered)
            px_timerq_cancel(q, id);
        owed += ordered.size();
    }
    void settle() override
    {
        wait_for(g_px_calls, owed);
        g_px_calls = 0;
        owed = 0;
    }
    int64_t expire(const std::vector<int64_t> &dl) override
    {
        g_px_calls = 0;
        g_px_target = dl.size();
        for (int64_t t : dl)
            px_timerq_add_at(q, t, px_count_last, nullptr);
        wait_for(g_px_calls, dl.size());
        g_px_calls = 0;
        return g_px_last.load();
    }
    void lateness(const std::vector<int64_t> &d, std::vector<int64_t> &late) override
    {
        std::vector<int64_t> due(d.size()), fired(d.size());
        g_px_calls = 0;
        g_px_target = d.size();
        for (size_t i = 0; i < d.size(); i++) {
            due[i] = px_now() + d[i];
            px_timerq_add_at(q, due[i], px_stamp, &fired[i]);
        }
        {
            std::unique_lock<std::mutex> g(g_stamp_lock);
            g_stamp_done.wait(g, [&] { return g_px_calls.load() >= d.size(); });
        }
        g_px_calls = 0;
        late.resize(d.size());
        for (size_t i = 0; i < d.size(); i++)
            late[i] = fired[i] - due[i];
    }
};

// -- libuv ------------------------------------------------------------------

#ifdef PXB_HAVE_UV
size_t g_uv_calls = 0, g_uv_target = 0;
int64_t g_uv_last = 0;

void uv_count_last(uv_timer_t *)
{
    if (++g_uv_calls == g_uv_target)
        g_uv_last = px_now();
}

void uv_stamp(uv_timer_t *h)
{
    *(int64_t *)h->data = px_now();
}

struct UvPeer : Peer {
    uv_loop_t loop;
    std::vector<uv_timer_t> h;
    explicit UvPeer(size_t n) : h(n)
    {
        name = "libuv";
        uv_loop_init(&loop);
        for (auto &t : h)   // caller memory: initialised (touched) once, up front
            uv_timer_init(&loop, &t);
    }
    ~UvPeer() override
    {
        for (auto &t : h)
            uv_close((uv_handle_t *)&t, nullptr);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
    }
    size_t caller_bytes() const override { return sizeof(uv_timer_t); }
    void add(const std::vector<int64_t> &d) override
    {
        for (size_t i = 0; i < d.size(); i++)
            uv_timer_start(&h[i], uv_count_last, (uint64_t)(d[i] / 1000000), 0);
    }
    void cancel(const std::vector<uint32_t> &order) override
    {
        for (uint32_t i : order)
            uv_timer_stop(&h[i]);
    }
    std::vector<uv_timer_t *> ordered;
    bool prepare(const std::vector<uint32_t> &order) override
    {
        ordered.resize(order.size());
        for (size_t k = 0; k < order.size(); k++)
            ordered[k] = &h[order[k]];
        return true;
    }
    void cancel_prepared() override
    {
        for (uv_timer_t *t : ordered)
            uv_timer_stop(t);
    }
    int64_t expire(const std::vector<int64_t> &dl) override
    {
        // libuv counts in whole ms from its cached loop time: give it the ms in
        // which each deadline falls, rounded up so none is asked for early.
        uv_update_time(&loop);
        int64_t base = (int64_t)uv_now(&loop) * 1000000;
        g_uv_calls = 0;
        g_uv_target = dl.size();
        for (size_t i = 0; i < dl.size(); i++)
            uv_timer_start(&h[i], uv_count_last, (uint64_t)((dl[i] - base + 999999) / 1000000), 0);
        uv_run(&loop, UV_RUN_DEFAULT);
        return g_uv_last;
    }
    void lateness(const std::vector<int64_t> &d, std::vector<int64_t> &late) override
    {
        std::vector<int64_t> due(d.size()), fired(d.size());
        uv_update_time(&loop);
        for (size_t i = 0; i < d.size(); i++) {
            h[i].data = &fired[i];
            due[i] = px_now() + d[i];   // what the caller asked for
            uv_timer_start(&h[i], uv_stamp, (uint64_t)(d[i] / 1000000), 0);
        }
        uv_run(&loop, UV_RUN_DEFAULT);
        late.resize(d.size());
        for (size_t i = 0; i < d.size(); i++)
            late[i] = fired[i] - due[i];
    }
};
#endif

// -- Boost.Asio -------------------------------------------------------------

#ifdef PXB_HAVE_ASIO
namespace asio = boost::asio;
using clock_tp = asio::steady_timer::time_point;

clock_tp tp_of(int64_t ns)
{
    return clock_tp(std::chrono::nanoseconds(ns));
}

struct AsioPeer : Peer {
    asio::io_context io;
    std::vector<asio::steady_timer> t;
    size_t calls = 0, target = 0;
    int64_t last = 0;
    explicit AsioPeer(size_t n)
    {
        name = "asio";
        t.reserve(n);
        for (size_t i = 0; i < n; i++)   // caller memory, constructed up front
            t.emplace_back(io);
    }
    size_t caller_bytes() const override { return sizeof(asio::steady_timer); }
    void add(const std::vector<int64_t> &d) override
    {
        for (size_t i = 0; i < d.size(); i++) {
            t[i].expires_after(std::chrono::nanoseconds(d[i]));
            t[i].async_wait([this](const boost::system::error_code &) { calls++; });
        }
    }
    void cancel(const std::vector<uint32_t> &order) override
    {
        for (uint32_t i : order)
            t[i].cancel();
    }
    std::vector<asio::steady_timer *> ordered;
    bool prepare(const std::vector<uint32_t> &order) override
    {
        ordered.resize(order.size());
        for (size_t k = 0; k < order.size(); k++)
            ordered[k] = &t[order[k]];
        return true;
    }
    void cancel_prepared() override
    {
        for (asio::steady_timer *p : ordered)
            p->cancel();
    }
    void settle() override
    {
        io.restart();
        io.run();   // runs the operation_aborted handlers
        calls = 0;
    }
    int64_t expire(const std::vector<int64_t> &dl) override
    {
        calls = 0;
        target = dl.size();
        for (size_t i = 0; i < dl.size(); i++) {
            t[i].expires_at(tp_of(dl[i]));
            t[i].async_wait([this](const boost::system::error_code &) {
                if (++calls == target)
                    last = px_now();
            });
        }
        io.restart();
        io.run();
        return last;
    }
    void lateness(const std::vector<int64_t> &d, std::vector<int64_t> &late) override
    {
        std::vector<int64_t> due(d.size()), fired(d.size());
        for (size_t i = 0; i < d.size(); i++) {
            due[i] = px_now() + d[i];
            t[i].expires_at(tp_of(due[i]));
            int64_t *slot = &fired[i];
            t[i].async_wait([slot](const boost::system::error_code &) { *slot = px_now(); });
        }
        io.restart();
        io.run();
        late.resize(d.size());
        for (size_t i = 0; i < d.size(); i++)
            late[i] = fired[i] - due[i];
    }
};
#endif

// -- the naive design: an ordered multiset, cancel scans every pending timer --

struct NaivePeer : Peer {
    struct Entry {
        int64_t deadline;
        uint64_t id;
        px_handler_fn fn;
        void *arg;
        bool operator<(const Entry &o) const { return deadline < o.deadline; }
    };
    std::mutex lock;
    std::multiset<Entry> set;
    std::vector<uint64_t> ids;   // caller memory, as parataxis's
    uint64_t next_id = 1;
    explicit NaivePeer(size_t n) : ids(n) { name = "naive"; }
    size_t cancel_limit() const override { return 200; }   // O(n) each: time 200 of them
    size_t caller_bytes() const override { return sizeof(uint64_t); }
    uint64_t add_one(int64_t delay)
    {
        std::lock_guard<std::mutex> g(lock);
        uint64_t id = next_id++;
        set.insert(Entry{px_now() + delay, id, px_count, nullptr});
        return id;
    }
    void add(const std::vector<int64_t> &d) override
    {
        ids.resize(d.size());
        for (size_t i = 0; i < d.size(); i++)
            ids[i] = add_one(d[i]);
    }
    bool cancel_one(uint64_t id)
    {
        std::lock_guard<std::mutex> g(lock);
        for (auto it = set.begin(); it != set.end(); ++it)
            if (it->id == id) {
                set.erase(it);
                return true;
            }
        return false;
    }
    void cancel(const std::vector<uint32_t> &order) override
    {
        for (uint32_t i : order)
            cancel_one(ids[i]);
    }
    void settle() override { set.clear(); }
    int64_t expire(const std::vector<int64_t> &) override { return 0; }
    void lateness(const std::vector<int64_t> &, std::vector<int64_t> &) override {}
};

// -- the runs -----------------------------------------------------------------

double ns_per(int64_t t0, int64_t t1, size_t n)
{
    return n ? (double)(t1 - t0) / (double)n : 0;
}

struct Figures {
    std::vector<double> add, add_at, cancel_seq, cancel_rnd, cancel_rnd_own, cancel_rnd_own_cpu, expire;
    double bytes_heap = 0, bytes_rss = 0;   // library growth per timer, caller bytes apart
};

const char *label_n(size_t n)
{
    return n == 1000 ? "1e3" : n == 100000 ? "1e5" : n == 1000000 ? "1e6" : "n";
}

// Prints "what @N: a x ns, b y ns, ..., ratio r1x libuv, r2x asio".  A NaN is a
// figure the peer does not have: left out, or printed as na when na is given.
void print_row(const char *what, size_t n, const std::vector<std::unique_ptr<Peer>> &peers,
               const std::vector<double> &v, const char *unit, bool higher_better,
               const char *na = nullptr)
{
    printf("%s @%s:", what, label_n(n));
    const char *sep = "";
    for (size_t i = 0; i < peers.size(); i++) {
        if (!std::isnan(v[i]))
            printf("%s %s %.4g %s", sep, peers[i]->name.c_str(), v[i], unit);
        else if (na)
            printf("%s %s %s", sep, peers[i]->name.c_str(), na);
        else
            continue;
        sep = ",";
    }
    sep = ", ratio";
    for (size_t i = 1; i < peers.size(); i++)
        if (v[i] > 0 && v[0] > 0) {   // false for NaN too
            printf("%s %.2fx %s", sep, higher_better ? v[i] / v[0] : v[0] / v[i], peers[i]->name.c_str());
            sep = ",";
        }
    printf("\n");
}

// The other libraries' peers this build has (libuv, Asio), for n timers.
static void add_foreign_peers(std::vector<std::unique_ptr<Peer>> &peers, size_t n)
{
#ifdef PXB_HAVE_UV
    peers.emplace_back(new UvPeer(n));
#endif
#ifdef PXB_HAVE_ASIO
    peers.emplace_back(new AsioPeer(n));
#endif
    (void)peers;
    (void)n;
}

double chase_ns(bool huge, size_t *thp);
int64_t thread_cpu_ns();

void run_ops(size_t n, int rounds)
{
    std::vector<std::unique_ptr<Peer>> peers;
    peers.emplace_back(new PxPeer(n, 0, "parataxis"));
    add_foreign_peers(peers, n);
    if (n <= 100000)
        peers.emplace_back(new NaivePeer(n));
    std::vector<Figures> fig(peers.size());
    Rng rng{0x5eed0000u + n};
    std::vector<int64_t> delays(n), deadlines(n);
    std::vector<uint32_t> seq(n), rnd = shuffled(n, 42 + n);
    for (size_t i = 0; i < n; i++)
        seq[i] = (uint32_t)i;

    std::vector<double> miss_small, miss_huge;   // at 1e6: the chase between the rounds
    for (int round = 0; round <= rounds; round++) {   // round 0 warms up
        if (round > 0 && n >= 1000000) {
            size_t thp;
            miss_small.push_back(chase_ns(false, &thp));
            miss_huge.push_back(chase_ns(true, &thp));
        }
        for (auto &d : delays)
            d = rng.range(FAR_LO, FAR_HI);
        for (size_t p = 0; p < peers.size(); p++) {
            Peer &peer = *peers[(p + (size_t)round) % peers.size()];   // rotate who goes first
            Figures &f = fig[(p + (size_t)round) % peers.size()];
            size_t limit = std::min(n, peer.cancel_limit());
            std::vector<uint32_t> seq_l(seq.begin(), seq.begin() + (long)limit);
            std::vector<uint32_t> rnd_l(rnd.begin(), rnd.begin() + (long)limit);

            size_t h0 = heap_bytes(), r0 = rss_bytes();
            int64_t t0 = px_now();
            peer.add(delays);
            int64_t t1 = px_now();
            if (round == 0) {
                f.bytes_heap = per_timer(h0, heap_bytes(), n);
                f.bytes_rss = per_timer(r0, rss_bytes(), n);
            }
            peer.cancel(seq_l);
            int64_t t2 = px_now();
            peer.settle();
            if (limit < n)
                peer.settle();   // the naive peer clears what it did not cancel
            int64_t t3 = px_now();
            peer.add(delays);
            int64_t t4 = px_now();
            peer.cancel(rnd_l);
            int64_t t5 = px_now();
            peer.settle();
            if (round > 0) {
                f.add.push_back(ns_per(t0, t1, n));
                f.add.push_back(ns_per(t3, t4, n));
                f.cancel_seq.push_back(ns_per(t1, t2, limit));
                f.cancel_rnd.push_back(ns_per(t4, t5, limit));
            }
            // Random order again, the caller's names for the timers read in order.
            peer.add(delays);
            if (peer.prepare(rnd_l)) {
                int64_t c8 = thread_cpu_ns(), t8 = px_now();
                peer.cancel_prepared();
                int64_t t9 = px_now(), c9 = thread_cpu_ns();
                if (round > 0) {
                    f.cancel_rnd_own.push_back(ns_per(t8, t9, limit));
                    f.cancel_rnd_own_cpu.push_back(ns_per(c8, c9, limit));
                }
            } else {
                peer.cancel(rnd_l);
            }
            peer.settle();
            // add_at: the deadlines are read off the clock before timing, not per add.
            int64_t now = px_now();
            for (size_t i = 0; i < n; i++)
                deadlines[i] = now + delays[i];
            int64_t t6 = px_now();
            if (!peer.add_at(deadlines))
                continue;
            int64_t t7 = px_now();
            peer.cancel(seq);
            peer.settle();
            if (round > 0)
                f.add_at.push_back(ns_per(t6, t7, n));
        }
        // Expiry: N timers due within 1 ms, 20 ms + the time to arm them ahead.
        for (size_t p = 0; p < peers.size(); p++) {
            Peer &peer = *peers[(p + (size_t)round) % peers.size()];
            Figures &f = fig[(p + (size_t)round) % peers.size()];
            if (peer.name == "naive")
                continue;
            int64_t t0 = px_now() + PX_MSEC(20) + (int64_t)n * 1000;
            std::vector<int64_t> dl(n);
            for (auto &t : dl)
                t = t0 + rng.range(0, PX_MSEC(1));
            int64_t last = peer.expire(dl);
            if (round > 0 && last > t0)
                f.expire.push_back((double)n / ((double)(last - t0) / 1e9) / 1e6);
        }
    }
    std::vector<double> v(peers.size());
    auto row = [&](const char *what, std::vector<double> Figures::*m, const char *unit, bool hb) {
        for (size_t i = 0; i < peers.size(); i++)
            v[i] = (fig[i].*m).empty() ? NAN : median(fig[i].*m);
        print_row(what, n, peers, v, unit, hb);
    };
    row("add", &Figures::add, "ns", false);
    row("add_at", &Figures::add_at, "ns", false);
    row("cancel(add order)", &Figures::cancel_seq, "ns", false);
    row("cancel(random order)", &Figures::cancel_rnd, "ns", false);
    row("cancel(random order, names in cancel order)", &Figures::cancel_rnd_own, "ns", false);
    row("cancel(random order, names in cancel order, caller CPU)", &Figures::cancel_rnd_own_cpu, "ns", false);
    if (!fig[0].cancel_rnd_own.empty() && !miss_small.empty())   // peers[0] is parataxis
        for (auto m : {&Figures::cancel_rnd_own, &Figures::cancel_rnd_own_cpu})
            printf("cancel(random order, names in cancel order%s) @%s: parataxis / memory miss = %.2fx "
                   "(4 KiB pages, %.1f ns), %.2fx (huge pages, %.1f ns): misses measured between the rounds\n",
                   m == &Figures::cancel_rnd_own ? "" : ", caller CPU", label_n(n),
                   median(fig[0].*m) / median(miss_small), median(miss_small),
                   median(fig[0].*m) / median(miss_huge), median(miss_huge));
    row("expiry", &Figures::expire, "M/s", true);
    // malloc cannot see mmap'd records: n/a rather than a figure that omits them.
    for (size_t i = 0; i < peers.size(); i++)
        v[i] = peers[i]->malloc_sees_records() ? fig[i].bytes_heap + (double)peers[i]->caller_bytes() : NAN;
    print_row("bytes/timer(malloc+caller)", n, peers, v, "B", false, "n/a (mmap'd)");
    for (size_t i = 0; i < peers.size(); i++)
        v[i] = fig[i].bytes_rss + (double)peers[i]->caller_bytes();
    print_row("bytes/timer(rss+caller)", n, peers, v, "B", false);
    for (size_t i = 0; i < peers.size(); i++)
        v[i] = fig[i].bytes_rss;
    print_row("bytes/timer(rss, library only)", n, peers, v, "B", false);
    fflush(stdout);
}

void run_lateness(int rounds)
{
    const size_t n = 2000;
    std::vector<std::unique_ptr<Peer>> peers;
    peers.emplace_back(new PxPeer(n, 0, "parataxis"));
    peers.emplace_back(new PxPeer(n, -1, "parataxis(slack 50us)"));
    add_foreign_peers(peers, n);
    std::vector<std::vector<int64_t>> all(peers.size());
    Rng rng{7};
    std::vector<int64_t> d(n), late;
    for (int round = 0; round < rounds; round++) {
        for (auto &x : d)
            x = rng.range(PX_MSEC(1), PX_MSEC(200));
        for (size_t p = 0; p < peers.size(); p++) {
            size_t k = (p + (size_t)round) % peers.size();
            peers[k]->lateness(d, late);
            all[k].insert(all[k].end(), late.begin(), late.end());
        }
    }
    printf("lateness (%zu timers x %d rounds at 1-200 ms, fire - due):\n", n, rounds);
    for (size_t k = 0; k < peers.size(); k++) {
        auto &v = all[k];
        std::sort(v.begin(), v.end());
        size_t early = (size_t)std::count_if(v.begin(), v.end(), [](int64_t x) { return x < 0; });
        printf("lateness %s: p50 %.1f us, p99 %.1f us, max %.1f us, early %zu (min %.1f us)\n",
               peers[k]->name.c_str(), (double)v[v.size() / 2] / 1e3, (double)v[v.size() * 99 / 100] / 1e3,
               (double)v.back() / 1e3, early, (double)v.front() / 1e3);
    }
    fflush(stdout);
}

// -- cold: the first N adds into fresh memory ---------------------------------
//
// What a new program pays for its first N timers: a new queue or loop, and
// memory that no round before has faulted in.  Each round makes everything anew
// and gives it all back (free, then malloc_trim(0), which also returns the free
// pages inside malloc's heap; parataxis unmaps its arenas), so every page the
// round writes is a first-touch fault.  Timed, per peer:
//   parataxis: px_timerq_new, a malloc'd array of N ids (the caller must keep
//              each id to cancel it), N px_timerq_add.
//   libuv:     uv_loop_init, then per timer a malloc'd uv_timer_t (a handle must
//              live until its close callback, so a program allocates each), its
//              pointer in a malloc'd array, uv_timer_init, uv_timer_start.
//   asio:      an io_context, then per timer a new steady_timer, its pointer in
//              a malloc'd array, expires_after, async_wait (which mallocs its op).
// The "starts only" columns allocate and initialise the handles / timer objects
// (fresh, in the same round) before the clock starts and time only the N starts:
// the caller's memory left out, as in the first add of the warm-up round of the
// ops rows (which is how issue 13 first measured a cold add).
//
// Two figures per peer: wall time, and the calling thread's CPU time (page faults
// included), which other programs on a shared machine do not inflate.  Neither
// counts what a peer's other threads did meanwhile (parataxis's worker).
//
// What a fault costs depends on where the kernel finds the page.  This VM reports
// free 2 MiB blocks to its host (virtio-balloon free page reporting) a few seconds
// after they were freed; a huge page made of such a block costs ~4 ms to fault in,
// against ~0.3 ms for one freed moments before.  Rounds here run back to back, so
// mostly the second case; PXB_COLD_IDLE_MS=4000 sleeps that long before each peer's
// run to see the first.  PXB_COLD_TRACE=1 prints every run.

struct ColdRun {
    double total, starts;   // ns per timer: everything, the N adds/starts alone
    double cpu;             // ns per timer of the calling thread's CPU time over `total`
};

// The calling thread's CPU time (user + system, page faults included), in ns: what
// the caller paid, without the time other programs on the machine took from it.
int64_t thread_cpu_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void give_back()
{
    malloc_trim(0);
}

ColdRun cold_px(const std::vector<int64_t> &d)
{
    size_t n = d.size();
    int64_t c0 = thread_cpu_ns(), t0 = px_now();
    px_timerq *q = px_timerq_new(nullptr);
    uint64_t *ids = (uint64_t *)malloc(n * sizeof *ids);
    int64_t t1 = px_now();
    for (size_t i = 0; i < n; i++)
        ids[i] = px_timerq_add(q, d[i], px_count, nullptr);
    int64_t t2 = px_now(), c2 = thread_cpu_ns();
    px_timerq_free(q);   // every timer gets its PX_ECANCELED call before this returns
    g_px_calls = 0;
    bool ok = ids[n - 1] != 0;
    free(ids);
    give_back();
    return ok ? ColdRun{ns_per(t0, t2, n), ns_per(t1, t2, n), ns_per(c0, c2, n)} : ColdRun{NAN, NAN, NAN};
}

#ifdef PXB_HAVE_UV
void uv_nop(uv_timer_t *) {}

// prealloc: handles malloc'd and initialised before the clock (starts only).
ColdRun cold_uv(const std::vector<int64_t> &d, bool prealloc)
{
    size_t n = d.size();
    uv_loop_t *loop = (uv_loop_t *)malloc(sizeof *loop);
    uv_timer_t **h = nullptr;
    int64_t t0 = 0, t1 = 0, c0 = 0;
    if (prealloc) {
        uv_loop_init(loop);
        h = (uv_timer_t **)malloc(n * sizeof *h);
        for (size_t i = 0; i < n; i++) {
            h[i] = (uv_timer_t *)malloc(sizeof(uv_timer_t));
            uv_timer_init(loop, h[i]);
        }
        c0 = thread_cpu_ns();
        t0 = t1 = px_now();
        for (size_t i = 0; i < n; i++)
            uv_timer_start(h[i], uv_nop, (uint64_t)(d[i] / 1000000), 0);
    } else {
        c0 = thread_cpu_ns();
        t0 = px_now();
        uv_loop_init(loop);
        h = (uv_timer_t **)malloc(n * sizeof *h);
        t1 = px_now();
        for (size_t i = 0; i < n; i++) {
            h[i] = (uv_timer_t *)malloc(sizeof(uv_timer_t));
            uv_timer_init(loop, h[i]);
            uv_timer_start(h[i], uv_nop, (uint64_t)(d[i] / 1000000), 0);
        }
    }
    int64_t t2 = px_now(), c2 = thread_cpu_ns();
    for (size_t i = 0; i < n; i++)
        uv_close((uv_handle_t *)h[i], [](uv_handle_t *x) { free(x); });
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    free(loop);
    free(h);
    give_back();
    return ColdRun{ns_per(t0, t2, n), prealloc ? ns_per(t1, t2, n) : NAN, ns_per(c0, c2, n)};
}
#endif

#ifdef PXB_HAVE_ASIO
ColdRun cold_asio(const std::vector<int64_t> &d, bool prealloc)
{
    size_t n = d.size();
    size_t calls = 0;
    int64_t t0 = 0, t1 = 0, t2 = 0, c0 = 0, c2 = 0;
    {
        auto io = std::make_unique<asio::io_context>();
        asio::steady_timer **t = (asio::steady_timer **)malloc(n * sizeof *t);
        auto arm = [&](size_t i) {
            t[i]->expires_after(std::chrono::nanoseconds(d[i]));
            t[i]->async_wait([&calls](const boost::system::error_code &) { calls++; });
        };
        if (prealloc) {
            for (size_t i = 0; i < n; i++)
                t[i] = new asio::steady_timer(*io);
            c0 = thread_cpu_ns();
            t0 = t1 = px_now();
            for (size_t i = 0; i < n; i++)
                arm(i);
        } else {
            c0 = thread_cpu_ns();
            t0 = px_now();
            io = std::make_unique<asio::io_context>();
            t1 = px_now();
            for (size_t i = 0; i < n; i++) {
                t[i] = new asio::steady_timer(*io);
                arm(i);
            }
        }
        t2 = px_now();
        c2 = thread_cpu_ns();
        for (size_t i = 0; i < n; i++)
            delete t[i];   // cancels its wait: operation_aborted, run below
        io->run();
        free(t);
    }
    give_back();
    return ColdRun{ns_per(t0, t2, n), prealloc ? ns_per(t1, t2, n) : NAN, ns_per(c0, c2, n)};
}
#endif

// Prints "what @N: a x ns, b y ns, ..., ratio r1x b, ..." from medians.
void print_cold(const char *what, size_t n, const std::vector<std::string> &names,
                const std::vector<std::vector<double>> &v)
{
    printf("%s @%s:", what, label_n(n));
    for (size_t i = 0; i < names.size(); i++)
        printf("%s %s %.4g ns", i ? "," : "", names[i].c_str(), median(v[i]));
    for (size_t i = 1; i < names.size(); i++)
        printf("%s %.2fx %s", i == 1 ? ", ratio" : ",", median(v[0]) / median(v[i]), names[i].c_str());
    printf("\n");
}

void run_cold(size_t n, int rounds)
{
    using Run = std::function<ColdRun(const std::vector<int64_t> &)>;
    std::vector<std::string> names{"parataxis"};
    std::vector<Run> runs{cold_px};
#ifdef PXB_HAVE_UV
    names.push_back("libuv");
    runs.push_back([](const std::vector<int64_t> &d) { return cold_uv(d, false); });
#endif
#ifdef PXB_HAVE_ASIO
    names.push_back("asio");
    runs.push_back([](const std::vector<int64_t> &d) { return cold_asio(d, false); });
#endif
#ifdef PXB_HAVE_UV
    names.push_back("libuv(starts only)");
    runs.push_back([](const std::vector<int64_t> &d) { return cold_uv(d, true); });
#endif
#ifdef PXB_HAVE_ASIO
    names.push_back("asio(starts only)");
    runs.push_back([](const std::vector<int64_t> &d) { return cold_asio(d, true); });
#endif
    size_t k = names.size();
    std::vector<std::vector<double>> wall(k), cpu(k);
    std::vector<double> px_adds;
    Rng rng{0xc01d0000u + n};
    std::vector<int64_t> delays(n);
    const char *idle = getenv("PXB_COLD_IDLE_MS");
    long idle_ms = idle ? atol(idle) : 0;
    give_back();
    for (int round = 0; round < rounds; round++) {
        for (auto &x : delays)
            x = rng.range(FAR_LO, FAR_HI);
        for (size_t p = 0; p < k; p++) {
            size_t i = (p + (size_t)round) % k;   // rotate who goes first
            if (idle_ms > 0)
                std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
            ColdRun r = runs[i](delays);
            wall[i].push_back(std::isnan(r.starts) ? r.total : r.starts);
            cpu[i].push_back(r.cpu);
            if (i == 0)
                px_adds.push_back(r.starts);
            if (getenv("PXB_COLD_TRACE"))
                fprintf(stderr, "cold round %d %s @%s: %.1f ns, cpu %.1f ns\n", round, names[i].c_str(),
                        label_n(n), wall[i].back(), r.cpu);
        }
    }
    print_cold("cold first adds", n, names, wall);
    print_cold("cold first adds, caller cpu", n, names, cpu);
    printf("cold first adds @%s: %d rounds%s; parataxis's adds alone (without px_timerq_new and the id "
           "array's malloc) %.4g ns\n", label_n(n), rounds, idle_ms > 0 ? ", idle before each run" : "",
           median(px_adds));
    fflush(stdout);
}

// -- the machine's memory latency ------------------------------------------

const size_t CHASE_BYTES = (size_t)64 << 20, CHASE_STEPS = 2000000;
const size_t HUGE_BYTES = (size_t)2 << 20;

struct alignas(64) Line {   // one cache line, a link to the next
    Line *next;
};

// The process's anonymous memory in transparent huge pages, in bytes.
size_t thp_bytes()
{
    size_t kb = 0;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %zu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

// ns per load of a dependent chase through one random cycle over all the lines:
// every load waits for the one before, so this is the latency of a miss (and,
// with 4 KiB pages, of the TLB miss that comes with it).  *thp: how much of the
// buffer the kernel did give huge pages, since MADV_HUGEPAGE is only a request.
double chase_ns(bool huge, size_t *thp)
{
    // 2 MiB more than needed, so that a 2 MiB-aligned span fits: THP maps whole
    // aligned pages only.
    size_t thp0 = thp_bytes();
    size_t span = CHASE_BYTES + HUGE_BYTES;
    void *m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NAN;
    char *a = (char *)(((uintptr_t)m + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    madvise(a, CHASE_BYTES, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);   // explicit either way
#endif
    Line *l = (Line *)a;
    size_t n = CHASE_BYTES / sizeof(Line);
    std::vector<uint32_t> p = shuffled(n, 99);
    for (size_t i = 0; i < n; i++)   // p[0] -> p[1] -> ... -> p[n-1] -> p[0]: one cycle
        l[p[i]].next = &l[p[(i + 1) % n]];
    Line *c = &l[p[0]];
    int64_t t0 = px_now();
    for (size_t i = 0; i < CHASE_STEPS; i++)
        c = c->next;
    int64_t t1 = px_now();
    bool ok = c != nullptr;   // uses c, so the chase is not optimised away
    size_t thp1 = thp_bytes();
    *thp = thp1 > thp0 ? thp1 - thp0 : 0;
    munmap(m, span);
    return ok ? ns_per(t0, t1, CHASE_STEPS) : NAN;
}

void print_memory_latency()
{
    size_t thp_small, thp_huge;
    double small = chase_ns(false, &thp_small), huge = chase_ns(true, &thp_huge);
    printf("memory latency (dependent random chase, 64 MiB, 64 B lines, %.0e loads): "
           "4 KiB pages %.1f ns/load, MADV_HUGEPAGE %.1f ns/load (huge pages: %zu, %zu of 64 MiB)\n",
           (double)CHASE_STEPS, small, huge, thp_small >> 20, thp_huge >> 20);
    fflush(stdout);
}

}  // namespace

int main(int argc, char **argv)
{
    std::string what = argc > 1 ? argv[1] : "all";
    size_t only_n = argc > 2 ? (size_t)atol(argv[2]) : 0;   // 0: 1e3, 1e5 and 1e6
    print_memory_latency();
    printf("sizeof: px record: see core/src/timerq/timerq.c (mmap'd arenas: only the rss rows count it)");
#ifdef PXB_HAVE_UV
    printf(", uv_timer_t %zu B", sizeof(uv_timer_t));
#endif
#ifdef PXB_HAVE_ASIO
    printf(", asio::steady_timer %zu B", sizeof(boost::asio::steady_timer));
#endif
    printf(", naive std::multiset node ~%zu B; caller ids %zu B\n", sizeof(NaivePeer::Entry) + 32,
           sizeof(uint64_t));
    if (what == "ops" || what == "all")
        for (size_t n : {(size_t)1000, (size_t)100000, (size_t)1000000})
            if (only_n == 0 || n == only_n)
                run_ops(n, n >= 1000000 ? 5 : 7);
    if (what == "cold" || what == "all")
        for (size_t n : {(size_t)100000, (size_t)1000000})
            if (only_n == 0 || n == only_n)
                run_cold(n, getenv("PXB_COLD_IDLE_MS") ? 5 : 9);
    if (what == "lateness" || what == "all")
        run_lateness(3);
    return 0;
}
