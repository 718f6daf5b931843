// The system OpenSSL's libcrypto (Debian's libssl-dev): SHA-256 through the EVP digest API,
// which uses the processor's SHA instructions where it has them.
#include <openssl/evp.h>
