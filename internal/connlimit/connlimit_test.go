package connlimit

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestBounds: past the per-address bound a client's connections are
// closed at once; a slot freed by Close is usable again.
func TestBounds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, 10, 2)
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	a1, a2 := <-accepted, <-accepted
	third := dial()
	// The third from the same address is refused: the server closes it.
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("third connection from one address: read %v, want EOF (closed by the server)", err)
	}
	if s := l.Stats(); s.Open != 2 || s.RefusedAddr != 1 {
		t.Fatalf("stats %+v, want 2 open, 1 refused for its address", s)
	}
	a1.Close()
	a1.Close() // twice: counted once
	dial()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot was not reused")
	}
	if s := l.Stats(); s.Open != 2 {
		t.Fatalf("open %d after one closed and one more accepted, want 2", s.Open)
	}
	_ = a2
}

// TestTotalBound: the total bound holds across addresses, and Unix socket
// clients (no address) count only against it.
func TestTotalBound(t *testing.T) {
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, 3, 1)
	defer l.Close()
	go func() {
		for {
			if _, err := l.Accept(); err != nil {
				return
			}
		}
	}()
	var cs []net.Conn
	for range 5 {
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().RefusedTotal < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := l.Stats(); s.Open != 3 || s.RefusedTotal != 2 || s.RefusedAddr != 0 {
		t.Fatalf("stats %+v, want 3 open and 2 refused over the total", s)
	}
}
