/* heap_bin.c -- the binary heap with back-pointers (see heap_dary.h). */
#define ARITY 2
#define PREFIX hb_
#include "heap_dary.h"
