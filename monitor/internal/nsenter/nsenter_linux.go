package nsenter

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Run runs fn with the calling goroutine's thread in network namespace ns.
// Sockets created by fn stay in ns for their whole life. With ns closed
// (netns.None()) fn runs in the current namespace.
func Run(ns netns.NsHandle, fn func() error) error {
	if !ns.IsOpen() {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("read current network namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace: %w", err)
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: it dies with the goroutine instead of
		// serving others from the wrong namespace.
		return fmt.Errorf("return to original network namespace: %w", err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Open runs open as Run runs fn, with the thread in ns, and returns what
// it opened: a socket opened there belongs to ns for its whole life.
func Open[T any](ns netns.NsHandle, open func() (T, error)) (T, error) {
	var v T
	err := Run(ns, func() error {
		var err error
		v, err = open()
		return err
	})
	return v, err
}
