//go:build unix

package table

import (
	"strconv"
	"syscall"
	"unsafe"
)

// allocRecs and allocSlots map anonymous memory outside the Go heap:
// the collector neither scans it nor counts it towards its goal, so a
// table of a million entries costs its bytes and not twice that. The
// memory holds no Go pointers. Each returns the release of what it made.
func allocRecs(n int) ([]rec, func()) {
	b := mmap(n * int(unsafe.Sizeof(rec{})))
	return unsafe.Slice((*rec)(unsafe.Pointer(unsafe.SliceData(b))), n), func() { _ = syscall.Munmap(b) }
}

func allocSlots(n int) ([]uint32, func()) {
	b := mmap(n * 4)
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), n), func() { _ = syscall.Munmap(b) }
}

// mmap maps size bytes of zeroed private memory; the kernel refusing it
// is out of memory, as an allocation that fails in the Go heap is.
func mmap(size int) []byte {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		panic("table: mapping " + strconv.Itoa(size) + " bytes: " + err.Error())
	}
	return b
}
