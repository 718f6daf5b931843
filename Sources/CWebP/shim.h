// libwebp (Debian's libwebp-dev): WebP tiles, decoded and encoded.
#include <webp/decode.h>
#include <webp/encode.h>
