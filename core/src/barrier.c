/* barrier.c -- being written. */
#include "waitq.h"
