/*
** trace.h -- PARATAXIS_TRACE=1: one line on stderr per fiber event (spawn, park
** with its reason, wake, timeout, cancel, exit), each with a timestamp and the
** fiber id, so a run can be read back afterwards.
*/
#ifndef PX__BASE_TRACE_H
#define PX__BASE_TRACE_H

#include <stdint.h>

extern int px__trace_on;

/* Reads PARATAXIS_TRACE once per process; call before looking at px__trace_on. */
void px__trace_init(void);

/* Writes "parataxis trace <seconds> fiber <id> <event>[ <detail>]". */
void px__trace(uint64_t id, const char *event, const char *detail);

#define PX__TRACE(id, event, detail) \
    do { if (px__trace_on) px__trace((id), (event), (detail)); } while (0)

#endif /* PX__BASE_TRACE_H */
