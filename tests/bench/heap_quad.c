/* heap_quad.c -- the 4-ary heap with back-pointers (see heap_dary.h). */
#define ARITY 4
#define PREFIX hq_
#include "heap_dary.h"
