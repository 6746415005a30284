package kernels

import (
	"compress/gzip"
	"fmt"
	"io"
	"sort"
)

// A File is one entry of an initramfs: a regular file (Data), a directory
// (Dir) or a symbolic link (Link).
type File struct {
	Mode uint32 // permission bits
	Data []byte
	Dir  bool
	Link string
}

// WriteInitramfs writes files as a gzip-compressed cpio archive in the
// "newc" format the kernel unpacks into its initial root. Parents come
// before children, so directories must be listed.
func WriteInitramfs(w io.Writer, files map[string]File) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names) // "a" before "a/b"
	ino := uint32(1)
	for _, n := range names {
		f := files[n]
		var typ uint32 = 0o100000
		data := f.Data
		switch {
		case f.Dir:
			typ, data = 0o040000, nil
		case f.Link != "":
			typ, data = 0o120000, []byte(f.Link)
		}
		if err := writeEntry(zw, n, ino, typ|f.Mode&0o7777, data); err != nil {
			return err
		}
		ino++
	}
	if err := writeEntry(zw, "TRAILER!!!", 0, 0, nil); err != nil {
		return err
	}
	return zw.Close()
}

// writeEntry writes one newc header, the name and the data, each padded
// to 4 bytes.
func writeEntry(w io.Writer, name string, ino, mode uint32, data []byte) error {
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	buf := append([]byte(hdr), name...)
	buf = append(buf, 0)
	buf = pad4(buf)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	_, err := w.Write(make([]byte, (4-len(data)%4)%4))
	return err
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
