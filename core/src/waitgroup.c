/* waitgroup.c -- being written. */
#include "waitq.h"
