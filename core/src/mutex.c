/* mutex.c -- being written. */
#include "waitq.h"
