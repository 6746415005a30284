/* BPF is little-endian here (bpfel). */
#include <linux/byteorder/little_endian.h>
