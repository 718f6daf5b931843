// The system zlib, for the benchmark's baseline of zlib alone on the same pixels.
#include <zlib.h>
