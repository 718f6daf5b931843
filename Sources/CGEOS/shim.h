// GEOS's C API (Debian's libgeos-dev), reentrant functions only: overlay, buffer, validity.
#define GEOS_USE_ONLY_R_API
#include <geos_c.h>
