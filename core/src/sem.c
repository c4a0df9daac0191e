/* sem.c -- being written. */
#include "waitq.h"
