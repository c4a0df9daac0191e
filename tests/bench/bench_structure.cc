// bench_structure.cc -- structured concurrency beside the loops it replaces
// and beside Go, in one run:
//
//   group          a group of 1,000 members spawned and waited for, per
//                  member, beside the same 1,000 fibers spawned in a loop and
//                  joined one by one, and beside Go's errgroup pattern (1,000
//                  goroutines and a sync.WaitGroup);
//   select         a consumer selecting over two channels that two producers
//                  fill (capacity 64 each), per value received, beside Go's
//                  select over the same two channels;
//   map            px_map of a trivial function over 1,000 items, 16 at once,
//                  per item (no peer: the figure shows what a call costs).
//
// Each figure is the median of ROUNDS rounds; ratios are ours / theirs.  Go's
// rows follow when run.sh names its program in PXB_GO (go_peer.h).
// Run: build-bench/tests/bench/bench_structure [rounds]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" {
#include "parataxis.h"
}

#include "go_peer.h"

static const int N_MEMBERS = 1000, GROUP_REPS = 200;
static const long N_SELECT = 1000000;
static const int N_ITEMS = 1000, MAP_REPS = 200;

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// -- group ---------------------------------------------------------------------

static int member(void *) { return 0; }
static void *nothing(void *) { return nullptr; }

static void *px_group_round(void *out)
{
    int64_t t0 = px_now();
    for (int r = 0; r < GROUP_REPS; r++) {
        px_group *g = px_group_new();
        for (int i = 0; i < N_MEMBERS; i++)
            px_group_spawn(g, member, nullptr);
        if (px_group_wait(g) != 0)
            std::abort();
        px_group_free(g);
    }
    *(double *)out = double(px_now() - t0) / (GROUP_REPS * N_MEMBERS);
    return nullptr;
}

static void *px_loop_round(void *out)
{
    static px_fiber *f[N_MEMBERS];
    int64_t t0 = px_now();
    for (int r = 0; r < GROUP_REPS; r++) {
        for (int i = 0; i < N_MEMBERS; i++)
            f[i] = px_spawn(nothing, nullptr);
        for (int i = 0; i < N_MEMBERS; i++) {
            px_join(f[i], nullptr);
            px_fiber_release(f[i]);
        }
    }
    *(double *)out = double(px_now() - t0) / (GROUP_REPS * N_MEMBERS);
    return nullptr;
}

// -- select --------------------------------------------------------------------

static void *producer(void *ch)
{
    for (long i = 0; i < N_SELECT / 2; i++)
        px_chan_send((px_chan *)ch, (void *)(intptr_t)(i + 1));
    return nullptr;
}

static void *px_select_round(void *out)
{
    px_chan *a = px_chan_new(64), *b = px_chan_new(64);
    int64_t t0 = px_now();
    px_fiber *pa = px_spawn(producer, a), *pb = px_spawn(producer, b);
    px_select_case k[2] = { { PX_SELECT_RECV, a, nullptr, 0, 0, 0, 0 },
                            { PX_SELECT_RECV, b, nullptr, 0, 0, 0, 0 } };
    long sum = 0;
    for (long i = 0; i < N_SELECT; i++) {
        int w = px_select(k, 2);
        if (w < 0)
            std::abort();
        sum += (long)(intptr_t)k[w].value;
    }
    if (sum != 2 * ((N_SELECT / 2) * (N_SELECT / 2 + 1) / 2))
        std::abort();
    *(double *)out = double(px_now() - t0) / N_SELECT;
    px_join(pa, nullptr);
    px_join(pb, nullptr);
    px_fiber_release(pa);
    px_fiber_release(pb);
    px_chan_free(a);
    px_chan_free(b);
    return nullptr;
}

// -- map -----------------------------------------------------------------------

static int twice(void *item, void **result)
{
    *result = (void *)(2 * (intptr_t)item);
    return 0;
}

static void *px_map_round(void *out)
{
    static void *items[N_ITEMS], *results[N_ITEMS];
    for (int i = 0; i < N_ITEMS; i++)
        items[i] = (void *)(intptr_t)i;
    int64_t t0 = px_now();
    for (int r = 0; r < MAP_REPS; r++)
        if (px_map(twice, items, results, N_ITEMS, 16) != 0)
            std::abort();
    *(double *)out = double(px_now() - t0) / (MAP_REPS * N_ITEMS);
    return nullptr;
}

// ------------------------------------------------------------------------------

static double px_round(px_fiber_fn fn)
{
    double r = 0;
    if (px_run(fn, &r, nullptr) != 0)
        std::abort();
    return r;
}

static void row(const char *what, double ours, const char *peer, double theirs)
{
    std::printf("%-26s parataxis %7.1f ns   %-26s %7.1f ns   ratio %.2f\n",
                what, ours, peer, theirs, ours / theirs);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
    go_peer go;
    std::vector<double> pg, pl, ps, pm, gg, gs;
    for (int r = 0; r < rounds; r++) {
        pg.push_back(px_round(px_group_round));
        pl.push_back(px_round(px_loop_round));
        ps.push_back(px_round(px_select_round));
        pm.push_back(px_round(px_map_round));
        gg.push_back(go.round("group"));
        gs.push_back(go.round("select2"));
    }
    std::printf("== structured concurrency, median of %d rounds\n", rounds);
    row("group of 1000, per member", median(pg), "spawn loop + join each", median(pl));
    if (go.running()) {
        row("group of 1000, per member", median(pg), "go 1000 goroutines+WaitGroup",
            median(gg));
        row("select over 2 channels", median(ps), "go select, 2 chans", median(gs));
    } else {
        std::printf("%-26s parataxis %7.1f ns\n", "select over 2 channels", median(ps));
    }
    std::printf("%-26s parataxis %7.1f ns\n", "map, 16 at once, per item", median(pm));
    return 0;
}
