/* rwlock.c -- being written. */
#include "waitq.h"
