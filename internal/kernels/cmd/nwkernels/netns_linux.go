package main

import (
	"runtime"

	"github.com/vishvananda/netns"
)

// inNS runs fn in the named network namespace on a locked thread.
func inNS(name string, fn func() error) error {
	h, err := netns.GetFromName(name)
	if err != nil {
		return err
	}
	defer h.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := netns.Set(h); err != nil {
		return err
	}
	defer netns.Set(orig)
	return fn()
}
