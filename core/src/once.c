/* once.c -- being written. */
#include "waitq.h"
