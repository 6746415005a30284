package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
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

// TestUnixPeerIsAClient: a Unix socket's client is its peer process, so
// one process past the per-client bound is refused by that bound (it
// counted only against the total before, and could hold every slot).
func TestUnixPeerIsAClient(t *testing.T) {
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
	for l.Stats().RefusedAddr < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := l.Stats(); s.Open != 1 || s.RefusedTotal != 0 || s.RefusedAddr != 4 {
		t.Fatalf("stats %+v, want 1 open and 4 refused over the per-client bound", s)
	}
}

// TestFairShare: with every slot taken by two addresses, a connection
// from a third takes the oldest slot of the largest holder, whose
// connection the server closes; a connection from a largest holder is
// refused. IPv6 addresses in one /64 count as one client.
func TestFairShare(t *testing.T) {
	const a, b, c = "127.0.0.2", "127.0.0.3", "127.0.0.4"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, 4, 3)
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedByServer := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	oldest := dial(a)
	<-accepted
	dial(a)
	<-accepted
	dial(a)
	<-accepted
	dial(b)
	<-accepted
	// Full: a holds 3, b 1. c holds none: it takes a's oldest.
	dial(c)
	<-accepted
	if !closedByServer(oldest) {
		t.Fatal("the largest holder's oldest connection was not closed to make room")
	}
	if s := l.Stats(); s.Open != 4 || s.Evicted != 1 || s.RefusedTotal != 0 {
		t.Fatalf("stats %+v, want 4 open, 1 evicted", s)
	}
	// Now a 2, b 1, c 1: b would hold 2, as many as a: refused.
	if late := dial(b); !closedByServer(late) {
		t.Fatal("a client that would hold as many as the largest was not refused")
	}
	if s := l.Stats(); s.RefusedTotal != 1 || s.Evicted != 1 {
		t.Fatalf("stats %+v, want 1 refused over the total", s)
	}
}

func TestClientKey(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7")}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7")}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1")}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9")}, "2001:db8:1:2::/64"},
		{&net.UnixAddr{Name: "@"}, ""},
	} {
		if got := clientKey(tc.addr); got != tc.want {
			t.Errorf("clientKey(%v) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestOnDrain: the drain hook runs once when a full listener falls to an
// eighth of its bound, and again only after it was full again.
func TestOnDrain(t *testing.T) {
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, 8, 8)
	defer l.Close()
	drained := make(chan struct{}, 4)
	l.OnDrain(func() { drained <- struct{}{} })
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	fill := func(n int) []net.Conn {
		var cs []net.Conn
		for range n {
			c, err := net.Dial("unix", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			cs = append(cs, <-accepted)
		}
		return cs
	}
	for round := range 2 {
		cs := fill(8)
		for _, c := range cs[:6] {
			c.Close()
		}
		// The hook runs in its own goroutine, but the listener decides to
		// run it under its lock, in Close: ask that decision, not the
		// goroutine, which may not have run yet.
		if !l.stillFull() {
			t.Fatalf("round %d: drained with 2 of 8 open, want at 1", round)
		}
		select {
		case <-drained:
			t.Fatalf("round %d: drain hook ran with 2 of 8 open, want at 1", round)
		default:
		}
		cs[6].Close()
		if l.stillFull() {
			t.Fatalf("round %d: not drained with 1 of 8 open", round)
		}
		select {
		case <-drained:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: no drain hook at 1 of 8 open", round)
		}
		cs[7].Close()
		fill(1)[0].Close() // not full since: no hook
	}
	select {
	case <-drained:
		t.Fatal("drain hook ran without the listener being full again")
	case <-time.After(100 * time.Millisecond):
	}
}

// serveHTTP runs an http.Server on a listener bounded to max, with
// Serve plugged in and grace shortened; h answers every request.
func serveHTTP(t *testing.T, max int, grace time.Duration, h http.HandlerFunc) (*Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, max, max)
	l.grace = grace
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	l.Serve(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l, ln.Addr().String()
}

// from dials addr from a loopback source address.
func from(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends one GET on c and returns the status, or 0 when the server
// closed the connection instead.
func get(t *testing.T, c net.Conn) int {
	t.Helper()
	return getPath(t, c, "/")
}

const stalledRequest = "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"

// TestStalledGoFirst: when every slot holds a connection that sent
// headers and a Content-Length but no body for longer than the grace, a
// newcomer from anywhere takes the oldest of them.
func TestStalledGoFirst(t *testing.T) {
	l, addr := serveHTTP(t, 4, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {})
	for i := range 4 {
		c := from(t, fmt.Sprintf("127.0.0.%d", 10+i), addr)
		if _, err := c.Write([]byte(stalledRequest)); err != nil {
			t.Fatal(err)
		}
	}
	waitOpen(t, l, 4)
	time.Sleep(100 * time.Millisecond)
	if code := get(t, from(t, "127.0.0.99", addr)); code != http.StatusOK {
		t.Fatalf("a newcomer behind 4 stalled connections got %d, want 200", code)
	}
	if s := l.Stats(); s.Evicted != 1 || s.RefusedTotal != 0 {
		t.Errorf("stats %+v, want one stalled connection evicted", s)
	}
}

// TestGoodClientGetsIn: a flood of young connections that have sent
// nothing fills every slot; a newcomer never answered before is refused,
// one whose earlier request was answered with success takes a slot.
func TestGoodClientGetsIn(t *testing.T) {
	l, addr := serveHTTP(t, 4, time.Hour, func(w http.ResponseWriter, r *http.Request) {})
	if code := get(t, from(t, "127.0.0.7", addr)); code != http.StatusOK {
		t.Fatalf("first request: %d", code)
	}
	waitGood(t, l, "127.0.0.7")
	lab := func() { // fill the slots with silent connections
		for i := range 4 {
			from(t, fmt.Sprintf("127.0.0.%d", 20+i), addr)
		}
		waitOpen(t, l, 4)
	}
	lab()
	if code := get(t, from(t, "127.0.0.8", addr)); code != 0 {
		t.Fatalf("a client never answered got %d while the slots were full, want refused", code)
	}
	if code := get(t, from(t, "127.0.0.7", addr)); code != http.StatusOK {
		t.Fatalf("a client answered before got %d, want 200", code)
	}
}

// TestServingAndGoodIdleKept: a connection being answered, and a
// successful client's idle keep-alive one, keep their slots whatever
// arrives; newcomers are refused instead.
func TestServingAndGoodIdleKept(t *testing.T) {
	release := make(chan struct{})
	l, addr := serveHTTP(t, 2, 10*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
	})
	idle := from(t, "127.0.0.7", addr)
	if code := get(t, idle); code != http.StatusOK {
		t.Fatalf("first request: %d", code)
	}
	waitGood(t, l, "127.0.0.7")
	slow := from(t, "127.0.0.7", addr)
	_ = slow.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := slow.Write([]byte("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitOpen(t, l, 2)
	time.Sleep(50 * time.Millisecond) // both past the grace
	for i := range 5 {
		if code := get(t, from(t, fmt.Sprintf("127.0.0.%d", 30+i), addr)); code != 0 {
			t.Fatalf("newcomer %d got %d, want refused", i, code)
		}
	}
	close(release)
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the request being answered: %v %v", resp, err)
	}
	if code := get(t, idle); code != http.StatusOK {
		t.Fatalf("the idle keep-alive connection: %d", code)
	}
}

// waitGood waits until the listener counts key's client as answered
// with success: the server marks it when the connection turns idle, which
// may come after the client has read the answer.
func waitGood(t *testing.T, l *Listener, key string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		l.mu.Lock()
		good := l.isGood(key, l.now())
		l.mu.Unlock()
		if good {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not counted as answered with success", key)
		}
	}
}

func waitOpen(t *testing.T, l *Listener, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); l.Stats().Open != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d open, want %d", l.Stats().Open, n)
		}
	}
}

// stillFull reports whether the listener has not drained since it was
// last full.
func (l *Listener) stillFull() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.full
}

// TestStalledBeforeAStrangersIdle: a full listener takes a stalled
// connection's slot for a client answered with success before it takes
// the older idle connection of a client never answered with success.
func TestStalledBeforeAStrangersIdle(t *testing.T) {
	l, addr := serveHTTP(t, 3, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/nf" {
			http.NotFound(w, r)
		}
	})
	if code := get(t, from(t, "127.0.0.7", addr)); code != http.StatusOK { // its idle connection keeps its slot
		t.Fatalf("first request: %d", code)
	}
	waitGood(t, l, "127.0.0.7")
	stranger := from(t, "127.0.0.20", addr)
	if code := getPath(t, stranger, "/nf"); code != http.StatusNotFound {
		t.Fatalf("the stranger's request: %d", code)
	}
	stalled := from(t, "127.0.0.10", addr)
	if _, err := stalled.Write([]byte(stalledRequest)); err != nil {
		t.Fatal(err)
	}
	waitOpen(t, l, 3)
	time.Sleep(100 * time.Millisecond) // the stalled one past the grace
	if code := get(t, from(t, "127.0.0.7", addr)); code != http.StatusOK {
		t.Fatalf("the successful client's newcomer got %d, want 200", code)
	}
	if code := getPath(t, stranger, "/nf"); code != http.StatusNotFound {
		t.Errorf("the stranger's idle connection: %d, want still open (404): it was taken before the stalled one", code)
	}
	if s := l.Stats(); s.Evicted != 1 {
		t.Errorf("stats %+v, want one connection evicted", s)
	}
}

// getPath is get for a path.
func getPath(t *testing.T, c net.Conn, path string) int {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
