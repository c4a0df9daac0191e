// go_peer.h -- Go beside bench_fiber and bench_sync (tests/bench/go).
//
// run.sh names the bench_go binary in PXB_GO.  go_peer runs it with -serve as
// a child and asks it, over a pipe, for one round of a Go row; the benchmarks
// ask after each of their own rounds, so that the Go rounds interleave with
// ours as Boost.Fiber's do (noise hits both alike), and print the medians with
// the ratio parataxis / Go.  Without PXB_GO (a run by hand) there is no child
// and every round is NaN: the Go rows are left out.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern char **environ;

struct go_peer {
    pid_t pid = -1;
    FILE *to = nullptr, *from = nullptr;

    go_peer()
    {
        const char *bin = std::getenv("PXB_GO");
        int in[2], out[2];
        if (!bin || !*bin || pipe2(in, O_CLOEXEC) != 0)
            return;
        if (pipe2(out, O_CLOEXEC) != 0) {
            close(in[0]), close(in[1]);
            return;
        }
        // The child's stdin and stdout; dup2 clears close-on-exec on them only.
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        char *argv[] = { const_cast<char *>(bin), const_cast<char *>("-serve"), nullptr };
        int e = posix_spawn(&pid, bin, &fa, nullptr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(in[0]), close(out[1]);
        if (e != 0) {
            std::fprintf(stderr, "go_peer: cannot run %s: %s\n", bin, std::strerror(e));
            close(in[1]), close(out[0]);
            pid = -1;
            return;
        }
        std::signal(SIGPIPE, SIG_IGN);   // a dead child is an error return, not a kill
        to = fdopen(in[1], "w");
        from = fdopen(out[0], "r");
    }
    go_peer(const go_peer &) = delete;
    go_peer &operator=(const go_peer &) = delete;
    ~go_peer() { stop(); }

    bool running() const { return to != nullptr; }

    // One round of the Go row named req (a bench_go -serve request): its ns
    // per op (bytes per goroutine for "parked N"), or NaN without a child.
    double round(const char *req)
    {
        char line[64];
        if (!to)
            return NAN;
        if (std::fprintf(to, "%s\n", req) < 0 || std::fflush(to) != 0 ||
            !std::fgets(line, sizeof line, from)) {
            std::fprintf(stderr, "go_peer: no answer to \"%s\": no more Go rows\n", req);
            stop();
            return NAN;
        }
        return std::strtod(line, nullptr);
    }

    void stop()
    {
        if (to)
            std::fclose(to);   // the child sees the end of its input and exits
        if (from)
            std::fclose(from);
        to = from = nullptr;
        if (pid > 0)
            waitpid(pid, nullptr, 0);
        pid = -1;
    }
};
