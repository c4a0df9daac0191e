/* event.c -- being written. */
#include "waitq.h"
