// libjpeg-turbo's TurboJPEG API (Debian's libturbojpeg0-dev): JPEG tiles, decoded and encoded.
#include <stddef.h>
#include <turbojpeg.h>
