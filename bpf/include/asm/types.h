/* The uapi headers include <asm/types.h>, which Debian keeps under the
 * host's multiarch directory; BPF targets want the generic one. */
#include <asm-generic/types.h>
