// PROJ (Debian's libproj-dev): coordinate operations between any CRSs it knows, and geodesics
// on the ellipsoid (Karney's algorithms in geodesic.h).
#include <proj.h>
#include <geodesic.h>
