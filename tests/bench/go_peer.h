// go_peer.h -- the Go figures (tests/bench/go) for bench_fiber and bench_sync.
//
// run.sh runs bench_go first (GOMAXPROCS=1), which writes its medians to a
// file, one "key value" a line, and names that file in PXB_GO when it runs
// bench_fiber and bench_sync; they print each Go figure beside their own
// median with the ratio parataxis / Go.  Without PXB_GO (a run by hand) they
// print no Go rows.  The Go figures come from another process, run just
// before, so their rounds are not interleaved with ours.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// The figure named key, or NaN when there is no file or no such key.
static double go_figure(const char *key)
{
    const char *path = std::getenv("PXB_GO");
    FILE *f = path && *path ? std::fopen(path, "r") : nullptr;
    double r = NAN;
    char line[128], k[64];
    double v;
    while (f && std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "%63s %lf", k, &v) == 2 && std::strcmp(k, key) == 0)
            r = v;
    if (f)
        std::fclose(f);
    return r;
}
