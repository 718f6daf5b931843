// libdeflate (Debian's libdeflate-dev): whole-buffer DEFLATE, several times faster than zlib's
// streaming inflate for PNG tiles.
#include <stddef.h>
#include <libdeflate.h>
