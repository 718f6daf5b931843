// The system zlib (Debian's zlib1g-dev): deflate/inflate for PNG, crc32 and crc32_combine for ZIP.
#include <zlib.h>
