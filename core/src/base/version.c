/* version.c -- px_version. */
#include "parataxis.h"

#define PX_STR_(x) #x
#define PX_STR(x) PX_STR_(x)

const char *px_version(void)
{
    return PX_STR(PX_VERSION_MAJOR) "." PX_STR(PX_VERSION_MINOR) "." PX_STR(PX_VERSION_PATCH);
}
