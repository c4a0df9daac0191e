/* Tiny assertion helper for the context/stack tests. */
#ifndef CTX_CHECK_H
#define CTX_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#endif
