/* version.c -- px_version. */
#include "parataxis.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

const char *px_version(void)
{
    return STRINGIFY(PX_VERSION_MAJOR) "." STRINGIFY(PX_VERSION_MINOR) "."
           STRINGIFY(PX_VERSION_PATCH);
}
