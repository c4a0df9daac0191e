/* chan.c -- being written. */
#include "waitq.h"
