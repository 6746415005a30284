package mirror

import (
	"testing"

	"golang.org/x/sys/unix"
)

func BenchmarkDecode(b *testing.B) {
	msg := ndmsg(unix.AF_INET, 3, unix.NUD_STALE, 0, attr(unix.NDA_DST, []byte{10, 0, 0, 1}),
		attr(unix.NDA_LLADDR, []byte{2, 0, 0, 0, 0, 1}), cacheinfo(1, 2, 3), attr(unix.NDA_PROBES, u32(0)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeNeigh(unix.RTM_NEWNEIGH, msg); err != nil {
			b.Fatal(err)
		}
	}
}
