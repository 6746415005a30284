//go:build !unix

package table

// allocRecs and allocSlots allocate in the Go heap where there is no
// mmap; the records hold no pointers, so the collector does not scan
// them.
func allocRecs(n int) ([]rec, func()) { return make([]rec, n), func() {} }

func allocSlots(n int) ([]uint32, func()) { return make([]uint32, n), func() {} }
