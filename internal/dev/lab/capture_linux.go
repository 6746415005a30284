package lab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func htons(v uint16) uint16 { return binary.BigEndian.Uint16(binary.NativeEndian.AppendUint16(nil, v)) }

// Capture records every frame on dev in the namespace that match accepts,
// sent or received, with the kernel's timestamp (SO_TIMESTAMPNS: when the
// frame passed the device, not when this process read it, so a busy CPU
// does not shift the times). Call the returned stop to end the capture
// and get the timestamps in order.
func (n NS) Capture(dev string, match func(frame []byte) bool) (stop func() []time.Time, err error) {
	var fd int
	err = n.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return fmt.Errorf("open packet socket: %w", err)
		}
		// ETH_P_ALL: only taps of all protocols see outgoing frames.
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind packet socket to %s: %w", dev, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("enable SO_TIMESTAMPNS: %w", err)
	}
	// A receive timeout lets the reader notice stop.
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100_000}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	var stopping atomic.Bool
	done := make(chan []time.Time, 1)
	go func() {
		var times []time.Time
		buf := make([]byte, 2048)
		oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
		for !stopping.Load() {
			nr, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					continue
				}
				break
			}
			if !match(buf[:nr]) {
				continue
			}
			if ts, ok := kernelTime(oob[:oobn]); ok {
				times = append(times, ts)
			}
		}
		done <- times
	}()
	return func() []time.Time {
		stopping.Store(true)
		times := <-done
		unix.Close(fd)
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		return times
	}, nil
}

// kernelTime finds the SCM_TIMESTAMPNS control message.
func kernelTime(oob []byte) (time.Time, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix()), true
		}
	}
	return time.Time{}, false
}
