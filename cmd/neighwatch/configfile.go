package main

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// maxConfigFile is the largest configuration file the agent reads: a
// Kubernetes ConfigMap holds at most 1 MiB, and the agent's own options
// fill a few kilobytes.
const maxConfigFile = 1 << 20

// readConfigBytes reads the configuration file, at most maxConfigFile
// bytes of a regular file. It opens without blocking and refuses what is
// not a regular file: a FIFO would hold the start (and the reload loop)
// until someone writes to it, and /dev/zero never ends.
func readConfigBytes(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): give a file", path, fi.Mode().Type())
	}
	if fi.Size() > maxConfigFile {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d a configuration file may hold: the agent's options fill a few kilobytes", path, fi.Size(), maxConfigFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfigFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigFile {
		return nil, fmt.Errorf("%s grew past the %d bytes a configuration file may hold while it was read", path, maxConfigFile)
	}
	return b, nil
}
