// libdeflate (Debian's libdeflate-dev), which the server gzips whole answers with: measured here
// against zlib on the same bytes.
#include <stddef.h>
#include <libdeflate.h>
