package rtnl

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseDatagram(t *testing.T) {
	body := AppendAttr(make([]byte, unix.SizeofNdMsg), unix.NDA_DST, []byte{10, 0, 0, 1})
	d := AppendMessage(nil, unix.RTM_NEWNEIGH, unix.NLM_F_MULTI, 9, body)
	d = AppendMessage(d, unix.NLMSG_DONE, unix.NLM_F_MULTI, 9, make([]byte, 4))
	var types []uint16
	if err := ParseDatagram(d, func(m Message) error { types = append(types, m.Header.Type); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(types) != 2 || types[0] != unix.RTM_NEWNEIGH || types[1] != unix.NLMSG_DONE {
		t.Fatalf("types = %v", types)
	}
	bad := AppendMessage(nil, unix.RTM_NEWNEIGH, 0, 0, nil)
	binary.NativeEndian.PutUint32(bad[0:], 1000)
	if err := ParseDatagram(bad, func(Message) error { return nil }); err == nil {
		t.Fatal("length past the datagram accepted")
	}
}

func TestWalkAttrs(t *testing.T) {
	b := AppendAttr(nil, 1, []byte{1, 2, 3}) // padded to 8
	b = AppendAttr(b, 2|unix.NLA_F_NESTED, []byte{4, 5, 6, 7})
	var got []uint16
	var lens []int
	if err := WalkAttrs(b, func(typ uint16, v []byte) error {
		got, lens = append(got, typ), append(lens, len(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 || lens[0] != 3 || lens[1] != 4 {
		t.Fatalf("types %v lengths %v", got, lens)
	}
	if err := WalkAttrs([]byte{0xff, 0, 1, 0}, func(uint16, []byte) error { return nil }); err == nil {
		t.Fatal("attribute longer than its buffer accepted")
	}
}
