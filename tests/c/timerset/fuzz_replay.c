/*
** fuzz_timerset_replay -- runs the fuzz target without libFuzzer: every file given
** on the command line (the seed corpus), then N pseudo-random inputs (argument 2,
** or PX_REPLAY_N; default 3000) from a fixed seed, so any compiler checks the model.
**
** Usage: fuzz_timerset_replay [corpus-file...]
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static void replay_file(const char *path)
{
    static uint8_t buf[1 << 16];
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
}

int main(int argc, char **argv)
{
    static uint8_t buf[4096];
    for (int i = 1; i < argc; i++)
        replay_file(argv[i]);
    const char *env = getenv("PX_REPLAY_N");
    long runs = env ? atol(env) : 3000;
    uint64_t seed = 20261202;
    for (long r = 0; r < runs; r++) {
        size_t len = (size_t)(rng(&seed) % sizeof buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)rng(&seed);
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("ok: %d corpus files, %ld random inputs\n", argc - 1, runs);
    return 0;
}
