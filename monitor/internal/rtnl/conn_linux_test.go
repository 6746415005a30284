package rtnl

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConnDumpLookupAndRefusal asks this namespace's kernel for things
// any process may read: a dump of the links (several datagrams of many
// messages, into a buffer that must grow first), one link by index, and a
// neighbour that does not exist, whose ENOENT must come back as such.
func TestConnDumpLookupAndRefusal(t *testing.T) {
	c, err := Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A buffer smaller than any reply: each must grow it, or be cut.
	c.buf = make([]byte, 16)
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}

	names := map[int32]string{}
	err = c.Do(unix.RTM_GETLINK, unix.NLM_F_DUMP, make([]byte, unix.SizeofIfInfomsg), func(typ uint16, b []byte) error {
		if typ != unix.RTM_NEWLINK || len(b) < unix.SizeofIfInfomsg {
			t.Errorf("reply type %d, %d bytes", typ, len(b))
			return nil
		}
		idx := int32(binary.NativeEndian.Uint32(b[4:8]))
		return WalkAttrs(b[unix.SizeofIfInfomsg:], func(at uint16, v []byte) error {
			if at == unix.IFLA_IFNAME {
				names[idx] = string(bytes.TrimRight(v, "\x00"))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if names[int32(ifc.Index)] != ifc.Name {
			t.Errorf("dump named %d %q, want %q (dump: %v)", ifc.Index, names[int32(ifc.Index)], ifc.Name, names)
		}
	}
	if len(names) != len(ifaces) {
		t.Errorf("dump has %d links, the namespace %d", len(names), len(ifaces))
	}

	// One link, not a dump: the reply is one message.
	req := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(req[4:8], uint32(ifaces[0].Index))
	n := 0
	if err := c.Do(unix.RTM_GETLINK, 0, req, func(typ uint16, b []byte) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("link %d: %d replies, %v", ifaces[0].Index, n, err)
	}

	// A neighbour no table holds: 192.0.2.1 (TEST-NET-1) on lo.
	nd := make([]byte, unix.SizeofNdMsg)
	nd[0] = unix.AF_INET
	binary.NativeEndian.PutUint32(nd[4:8], 1)
	nd = AppendAttr(nd, unix.NDA_DST, []byte{192, 0, 2, 1})
	err = c.Do(unix.RTM_GETNEIGH, 0, nd, func(uint16, []byte) error {
		t.Error("a reply for a neighbour that is not there")
		return nil
	})
	if !errors.Is(err, unix.ENOENT) {
		t.Fatalf("missing neighbour: %v, want ENOENT", err)
	}

	// The connection still works after a refusal.
	n = 0
	if err := c.Do(unix.RTM_GETLINK, 0, req, func(uint16, []byte) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("after the refusal: %d replies, %v", n, err)
	}
}
