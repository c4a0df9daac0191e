/* error.c -- px_strerror and px_errname: one sentence and one name per error
** code.  tests/c/api/errname.c checks both against the header's PX_E* lines. */
#include "parataxis.h"

const char *px_strerror(int code)
{
    switch (code) {
    case 0:             return "success";
    case PX_EINVAL:     return "invalid argument";
    case PX_ENOMEM:     return "out of memory";
    case PX_ETIMEDOUT:  return "timed out";
    case PX_ECANCELED:  return "cancelled";
    case PX_EDEADLK:    return "deadlock: the wait could never end";
    case PX_EPERM:      return "not the owner";
    case PX_EBUSY:      return "busy";
    case PX_EOWNERDEAD: return "acquired, but the previous owner ended holding it";
    case PX_ENOFIBER:   return "not called from a fiber";
    case PX_EYIELD:     return "the hosted fiber must yield to its scheduler";
    case PX_ECLOSED:    return "closed";
    case PX_EFORKED:    return "belongs to the parent process of a fork";
    case PX_ETHREAD:    return "called from the wrong thread";
    case PX_EINTR:      return "interrupted by a signal";
    case PX_ENOTSUP:    return "not supported";
    default:            return "unknown error";
    }
}

const char *px_errname(int code)
{
    switch (code) {
    case PX_EINVAL:     return "EINVAL";
    case PX_ENOMEM:     return "ENOMEM";
    case PX_ETIMEDOUT:  return "ETIMEDOUT";
    case PX_ECANCELED:  return "ECANCELED";
    case PX_EDEADLK:    return "EDEADLK";
    case PX_EPERM:      return "EPERM";
    case PX_EBUSY:      return "EBUSY";
    case PX_EOWNERDEAD: return "EOWNERDEAD";
    case PX_ENOFIBER:   return "ENOFIBER";
    case PX_EYIELD:     return "EYIELD";
    case PX_ECLOSED:    return "ECLOSED";
    case PX_EFORKED:    return "EFORKED";
    case PX_ETHREAD:    return "ETHREAD";
    case PX_EINTR:      return "EINTR";
    case PX_ENOTSUP:    return "ENOTSUP";
    default:            return "EUNKNOWN";
    }
}
