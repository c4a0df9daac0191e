/*
** spec.h -- the harness of every C test that holds several behaviours: one
** executable per file, one ctest per behaviour (tests/c/CMakeLists.txt,
** px_spec_tests).
**
** A test file is a list of specifications:
**
**     SPEC(fifo_handoff)
**     {
**         ...CHECKs...
**     }
**
** ending with SPECS(fifo_handoff, ...) to list them, or SPECS_AROUND(setup,
** teardown, fifo_handoff, ...) when the specs need setup() first (a latch to
** init, a queue to make) and teardown() after (its free, and what it checks);
** either may be NULL.
** Run with a name it runs that one (ctest runs each by name), without one it
** runs them all.  Each SPEC(...) line must start its line: CMake reads the
** names from the source, and so does tests/conformance.py.  A second argument
** is left in spec_arg for the spec to read (sync/family.c: the primitive to
** check).
*/
#ifndef PX_TEST_SPEC_H
#define PX_TEST_SPEC_H

#include <string.h>

#include "check.h"

typedef struct spec {
    const char *name;
    void (*run)(void);
} spec;

#define SPEC(name) static void spec_##name(void)

typedef struct spec_hooks {
    void (*setup)(void);      /* before the spec(s) run, or NULL */
    void (*teardown)(void);   /* after they ran, or NULL */
} spec_hooks;

static const char *spec_arg;     /* the second argument, or NULL */

/* SPECS(a, b, c): the table and main().  Up to 32 names per file. */
#define SPECS(...) SPECS_AROUND(NULL, NULL, __VA_ARGS__)

/* The same, setup() called once before the spec(s) run and teardown() once after. */
#define SPECS_AROUND(setup, teardown, ...) \
    static const spec specs_[] = { SPEC_EACH_(__VA_ARGS__) }; \
    int main(int argc, char **argv) \
    { \
        const spec_hooks hooks_ = { setup, teardown }; \
        return spec_main(specs_, sizeof specs_ / sizeof specs_[0], &hooks_, argc, argv); \
    }

#define SPEC_E_(x) { #x, spec_##x },
#define SPEC_EACH_(...) SPEC_N_(__VA_ARGS__, SPEC_32_, SPEC_31_, SPEC_30_, SPEC_29_, \
    SPEC_28_, SPEC_27_, SPEC_26_, SPEC_25_, SPEC_24_, SPEC_23_, SPEC_22_, SPEC_21_, \
    SPEC_20_, SPEC_19_, SPEC_18_, SPEC_17_, SPEC_16_, SPEC_15_, SPEC_14_, SPEC_13_, \
    SPEC_12_, SPEC_11_, SPEC_10_, SPEC_9_, SPEC_8_, SPEC_7_, SPEC_6_, SPEC_5_, \
    SPEC_4_, SPEC_3_, SPEC_2_, SPEC_1_, SPEC_0_)(__VA_ARGS__)
#define SPEC_N_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, \
    _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, \
    _32, N, ...) N
#define SPEC_1_(a) SPEC_E_(a)
#define SPEC_2_(a, ...) SPEC_E_(a) SPEC_1_(__VA_ARGS__)
#define SPEC_3_(a, ...) SPEC_E_(a) SPEC_2_(__VA_ARGS__)
#define SPEC_4_(a, ...) SPEC_E_(a) SPEC_3_(__VA_ARGS__)
#define SPEC_5_(a, ...) SPEC_E_(a) SPEC_4_(__VA_ARGS__)
#define SPEC_6_(a, ...) SPEC_E_(a) SPEC_5_(__VA_ARGS__)
#define SPEC_7_(a, ...) SPEC_E_(a) SPEC_6_(__VA_ARGS__)
#define SPEC_8_(a, ...) SPEC_E_(a) SPEC_7_(__VA_ARGS__)
#define SPEC_9_(a, ...) SPEC_E_(a) SPEC_8_(__VA_ARGS__)
#define SPEC_10_(a, ...) SPEC_E_(a) SPEC_9_(__VA_ARGS__)
#define SPEC_11_(a, ...) SPEC_E_(a) SPEC_10_(__VA_ARGS__)
#define SPEC_12_(a, ...) SPEC_E_(a) SPEC_11_(__VA_ARGS__)
#define SPEC_13_(a, ...) SPEC_E_(a) SPEC_12_(__VA_ARGS__)
#define SPEC_14_(a, ...) SPEC_E_(a) SPEC_13_(__VA_ARGS__)
#define SPEC_15_(a, ...) SPEC_E_(a) SPEC_14_(__VA_ARGS__)
#define SPEC_16_(a, ...) SPEC_E_(a) SPEC_15_(__VA_ARGS__)
#define SPEC_17_(a, ...) SPEC_E_(a) SPEC_16_(__VA_ARGS__)
#define SPEC_18_(a, ...) SPEC_E_(a) SPEC_17_(__VA_ARGS__)
#define SPEC_19_(a, ...) SPEC_E_(a) SPEC_18_(__VA_ARGS__)
#define SPEC_20_(a, ...) SPEC_E_(a) SPEC_19_(__VA_ARGS__)
#define SPEC_21_(a, ...) SPEC_E_(a) SPEC_20_(__VA_ARGS__)
#define SPEC_22_(a, ...) SPEC_E_(a) SPEC_21_(__VA_ARGS__)
#define SPEC_23_(a, ...) SPEC_E_(a) SPEC_22_(__VA_ARGS__)
#define SPEC_24_(a, ...) SPEC_E_(a) SPEC_23_(__VA_ARGS__)
#define SPEC_25_(a, ...) SPEC_E_(a) SPEC_24_(__VA_ARGS__)
#define SPEC_26_(a, ...) SPEC_E_(a) SPEC_25_(__VA_ARGS__)
#define SPEC_27_(a, ...) SPEC_E_(a) SPEC_26_(__VA_ARGS__)
#define SPEC_28_(a, ...) SPEC_E_(a) SPEC_27_(__VA_ARGS__)
#define SPEC_29_(a, ...) SPEC_E_(a) SPEC_28_(__VA_ARGS__)
#define SPEC_30_(a, ...) SPEC_E_(a) SPEC_29_(__VA_ARGS__)
#define SPEC_31_(a, ...) SPEC_E_(a) SPEC_30_(__VA_ARGS__)
#define SPEC_32_(a, ...) SPEC_E_(a) SPEC_31_(__VA_ARGS__)

static inline int spec_main(const spec *s, size_t n, const spec_hooks *hooks, int argc,
                            char **argv)
{
    if (argc > 2)
        spec_arg = argv[2];
    size_t ran = 0;
    for (size_t i = 0; i < n; i++)
        if (argc < 2 || strcmp(argv[1], s[i].name) == 0) {
            if (ran++ == 0 && hooks->setup)
                hooks->setup();
            s[i].run();
            printf("ok %s\n", s[i].name);
        }
    if (ran == 0) {
        fprintf(stderr, "no specification named %s\n", argv[1]);
        return 2;
    }
    if (hooks->teardown)
        hooks->teardown();
    return 0;
}

#endif /* PX_TEST_SPEC_H */
