/*
** trace.h -- PARATAXIS_TRACE=1: one line on stderr per fiber event (spawn, park
** with its reason, wake, timeout, cancel, exit), each with a timestamp and the
** fiber's number and name, so a run can be read back afterwards.
*/
#ifndef PX__BASE_TRACE_H
#define PX__BASE_TRACE_H

#include <stdint.h>

extern int px__trace_on;

/* Reads PARATAXIS_TRACE once per process; call before looking at px__trace_on. */
void px__trace_init(void);

/* Writes "parataxis trace <seconds> fiber <number>[ "<name>"] <event>[ "<detail>"]".
** (fiber.h's PX__FIBER_TRACE gives it a fiber's number and name.) */
void px__trace(uint64_t number, const char *name, const char *event, const char *detail);

#endif /* PX__BASE_TRACE_H */
