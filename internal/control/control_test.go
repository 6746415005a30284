package control

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"time"

	"golang.org/x/sys/unix"

	"github.com/neighwatch/neighwatch/table"
)

func serve(t *testing.T, tb *table.Table) (*Client, *Server) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v; want 0600", fi.Mode(), err)
	}
	srv := NewServer(NewHandler(tb))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return NewClient(path), srv
}

// serveHTTP is serve with a plain HTTP client of the socket, for the
// requests the Client does not make.
func serveHTTP(t *testing.T, tb *table.Table) (*Client, *Server, *http.Client) {
	t.Helper()
	c, srv := serve(t, tb)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", c.path)
	}}}
	t.Cleanup(hc.CloseIdleConnections)
	return c, srv, hc
}

// TestStatusAndEvents: status lists the table; an event stream opened with
// OpenEvents sees every change made after it returned, and ends with
// ErrStreamClosed when the agent closes it.
func TestStatusAndEvents(t *testing.T) {
	tb := table.New(time.Minute, nil)
	tb.SetLinkName(2, "eth0")
	ip := netip.MustParseAddr("10.0.0.7")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 7}
	tb.Apply(table.CauseNetlink, table.Update{Family: table.FamilyInet, Ifindex: 2, State: table.StateReachable, Addr: ip, LLAddr: mac})
	c, srv := serve(t, tb)
	ctx := context.Background()
	entries, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].IP != ip.String() || entries[0].Interface != "eth0" || entries[0].LLAddr != mac.String() {
		t.Fatalf("status = %+v", entries)
	}
	stream, err := c.OpenEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	// No wait: OpenEvents returned after the agent subscribed.
	tb.Apply(table.CauseNetlink, table.Update{Family: table.FamilyInet, Ifindex: 2, State: table.StateStale, Addr: ip, LLAddr: mac})
	ev, err := stream.Next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != "transition" || ev.From != "reachable" || ev.To != "stale" || ev.Cause != "netlink" || ev.Interface != "eth0" {
		t.Fatalf("event = %+v", ev)
	}
	srv.Stop()
	if _, err := stream.Next(); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("after the agent closed the stream: %v, want ErrStreamClosed", err)
	}
}

func TestListenRefusesWhatIsNotASocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file); err == nil {
		t.Fatal("a regular file was replaced by the control socket")
	}
	// A socket nobody serves (left by a crash) is replaced.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln2, err := Listen(stale)
	if err != nil {
		t.Fatalf("a stale socket was not replaced: %v", err)
	}
	ln2.Close()
}

func TestClientExplainsMissingAgent(t *testing.T) {
	c := NewClient(filepath.Join(t.TempDir(), "none.sock"))
	if _, err := c.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "no agent at") {
		t.Fatalf("err = %v", err)
	}
}

// TestStrictJSON: exact field names, no unknown fields, no field twice
// (the last would win: {"mode":"off","mode":"on"} turned remediation on),
// nothing after the object.
func TestStrictJSON(t *testing.T) {
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{`{"mode":"off"}`, true},
		{`{"mode":"off"} garbage {"mode":"on"}`, false},
		{`{"mode":"off"}{"mode":"on"}`, false},
		{`{"MODE":"off"}`, false},
		{`{"Mode":"off"}`, false},
		{`{"mode":"off","extra":1}`, false},
		{`{"mode":"on","mode":"off"}`, false},
		{`{"mode":"off","mode":"off"}`, false},
		{` { "mode" : "off" } `, true},
		{`{"mode":"off"`, false},
		{`{"mode":}`, false},
		{`["off"]`, false},
		{`"off"`, false},
		{``, false},
	} {
		r, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader(tc.body))
		var req RemediationRequest
		err := ReadJSON(r, &req)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok=%v", tc.body, err, tc.ok)
		}
		if err == nil && req.Mode != "off" {
			t.Errorf("%q: mode %q", tc.body, req.Mode)
		}
	}
}

// openStreams opens MaxSubscribers event streams on c, closed when the
// test ends.
func openStreams(t *testing.T, c *Client) []*EventStream {
	t.Helper()
	var streams []*EventStream
	for range MaxSubscribers {
		s, err := c.OpenEvents(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		streams = append(streams, s)
	}
	return streams
}

// TestSubscriberCap: past MaxSubscribers an event stream is refused with a
// reason; closing one makes room.
func TestSubscriberCap(t *testing.T) {
	tb := table.New(time.Minute, nil)
	c, _ := serve(t, tb)
	ctx := context.Background()
	streams := openStreams(t, c)
	if _, err := c.OpenEvents(ctx); err == nil || !strings.Contains(err.Error(), "too many event streams") {
		t.Fatalf("subscriber %d: %v, want refused", MaxSubscribers+1, err)
	}
	streams[0].Close()
	var err error
	for range 50 { // the agent notices the close when its write fails or the request ends
		var s *EventStream
		if s, err = c.OpenEvents(ctx); err == nil {
			s.Close()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after closing one: %v", err)
	}
}

// TestListenPermissions: under umask 000 the socket is 0600 the moment it
// appears at its path.
func TestListenPermissions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock") // 0700 under the umask
	old := unix.Umask(0)
	defer unix.Umask(old)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("%v %v, want a 0600 socket", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
	if _, err := Listen(""); err == nil {
		t.Fatal("an empty path was accepted")
	}
	if _, err := Listen(t.TempDir()); err == nil {
		t.Fatal("a directory was accepted as the socket path")
	}
	long := filepath.Join(t.TempDir(), strings.Repeat("x", maxSocketPath))
	if _, err := Listen(long); err == nil || !strings.Contains(err.Error(), "choose a shorter") {
		t.Fatalf("a %d-byte path: %v, want refused (no client could connect)", len(long), err)
	}
}

// TestHeapProfile: the socket serves the runtime's heap profile (gzipped
// protobuf, so it starts with gzip's magic), taken after a collection.
func TestHeapProfile(t *testing.T) {
	c, _ := serve(t, table.New(time.Minute, nil))
	resp, err := c.do(context.Background(), http.MethodGet, "/debug/pprof/heap?gc=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 2)
	if _, err := io.ReadFull(resp.Body, b); err != nil || resp.StatusCode != http.StatusOK || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("heap profile: status %d, starts %x, %v", resp.StatusCode, b, err)
	}
}

// TestListenRefusesADirectoryOthersOwn: a socket in a directory another
// user owns, or may write without the sticky bit, could be renamed away
// and replaced by theirs: refused, with the fix. A sticky one (/tmp's
// kind) is not.
func TestListenRefusesADirectoryOthersOwn(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		d := filepath.Join(base, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	writable := mk("writable", 0o777)
	if _, err := Listen(filepath.Join(writable, "c.sock")); err == nil || !strings.Contains(err.Error(), "is writable by other users (mode -rwxrwxrwx)") {
		t.Errorf("a directory anyone may write: %v, want refused", err)
	}
	// Its group's members are other users too.
	group := mk("group", 0o770)
	if _, err := Listen(filepath.Join(group, "c.sock")); err == nil || !strings.Contains(err.Error(), "is writable by other users (mode -rwxrwx---)") {
		t.Errorf("a directory its group may write: %v, want refused", err)
	}
	below := filepath.Join(writable, "sub")
	if err := os.Mkdir(below, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(below, "c.sock")); err == nil || !strings.Contains(err.Error(), writable+" is writable by other users") {
		t.Errorf("below a directory anyone may write: %v, want refused, naming it", err)
	}
	sticky := mk("sticky", 0o777|os.ModeSticky)
	ln, err := Listen(filepath.Join(sticky, "c.sock"))
	if err != nil {
		t.Fatalf("a sticky directory: %v", err)
	}
	ln.Close()
	if os.Geteuid() != 0 {
		t.Log("not root: the directory of another user is not tried (chown needs root)")
		return
	}
	theirs := mk("theirs", 0o755)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(filepath.Join(theirs, "c.sock")); err == nil || !strings.Contains(err.Error(), "belongs to user 65534, who could take the socket") {
		t.Errorf("another user's directory: %v, want refused", err)
	}
}

// TestProfileSecondsBounded: a profile of more than MaxProfileSeconds (or
// a seconds that is not a number of them) is refused at once with the
// range; an hour's CPU profile held the connection and the profiler for
// the hour. One second is still served.
func TestProfileSecondsBounded(t *testing.T) {
	_, _, hc := serveHTTP(t, table.New(time.Minute, nil))
	get := func(u string) (int, string) {
		t.Helper()
		// Refusals come at once; an accepted hour would not come at all.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://neighwatch"+u, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, u := range []string{
		"/debug/pprof/profile?seconds=3600", "/debug/pprof/heap?seconds=3600", "/debug/pprof/allocs?seconds=26",
		"/debug/pprof/profile?seconds=0", "/debug/pprof/profile?seconds=-1", "/debug/pprof/profile?seconds=1e9",
		"/debug/pprof/goroutine?seconds=1&seconds=3600",
	} {
		code, body := get(u)
		if code != http.StatusBadRequest || !strings.Contains(body, "from 1 to 25") {
			t.Errorf("%s: %d %q, want 400 naming the range", u, code, body)
		}
	}
	for _, u := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/heap?seconds=1", "/debug/pprof/heap?gc=1"} {
		if code, body := get(u); code != http.StatusOK || len(body) == 0 {
			t.Errorf("%s: %d, %d bytes; want a profile", u, code, len(body))
		}
	}
}

// TestStalledStreamsLoseTheirSlots: event streams whose clients never
// read hold every stream slot only until a write of theirs has waited
// streamWrite (shortened here): once the socket's buffer is full, the
// agent drops them, and a new subscriber gets a slot and its events. 16
// such streams held all slots until they closed.
func TestStalledStreamsLoseTheirSlots(t *testing.T) {
	old := streamWrite
	streamWrite = 300 * time.Millisecond
	defer func() { streamWrite = old }()
	tb := table.New(time.Minute, nil)
	tb.SetLinkName(2, "eth0")
	c, _ := serve(t, tb)
	ctx := context.Background()
	// MaxSubscribers clients that ask for the stream, read its head (the
	// agent has subscribed them) and never read more.
	for i := range MaxSubscribers {
		conn, err := net.Dial("unix", c.path)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /v1/events HTTP/1.1\r\nHost: neighwatch\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		head, err := http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
		if err != nil || head.StatusCode != http.StatusOK {
			t.Fatalf("stalled client %d: %v, %v", i, head, err)
		}
	}
	if _, err := c.OpenEvents(ctx); err == nil || !strings.Contains(err.Error(), "too many event streams") {
		t.Fatalf("with %d streams open: %v, want refused", MaxSubscribers, err)
	}
	ip := netip.MustParseAddr("10.0.0.7")
	publish := func(n int) {
		for i := range n {
			tb.Publish(table.Event{Time: time.Now(), Ifindex: 2, Family: table.FamilyInet, IP: ip, Kind: table.KindTransition,
				From: table.StateStale, To: table.StateReachable, Detail: strings.Repeat("x", 200) + strconv.Itoa(i)})
		}
	}
	// Events until their buffers fill and their writes time out.
	var s *EventStream
	var err error
	var published int
	for published = 0; published < 1_000_000; published += 2000 {
		publish(2000)
		if s, err = c.OpenEvents(ctx); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("after %d events the stalled streams still hold every slot: %v", published, err)
	}
	defer s.Close()
	t.Logf("a slot came free after %d events", published+2000)
	// The new subscriber's stream works.
	go publish(1)
	ev, err := s.Next()
	if err != nil || ev.IP != ip.String() {
		t.Fatalf("the new stream: %+v, %v", ev, err)
	}
}

// rawRequest writes one request on conn and reads its whole answer,
// keeping the connection open (keep-alive).
func rawRequest(t *testing.T, conn net.Conn, br *bufio.Reader, path string) int {
	t.Helper()
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: neighwatch\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// fromAnotherProcess asks path for /v1/status from a process of its own
// (this test binary, run again: TestMain): the limiter keys
// a Unix socket's clients by process, and a newcomer from the process
// that holds every slot would meet its per-client bound instead. It
// returns the answer's status line, or what went wrong.
func fromAnotherProcess(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "NEIGHWATCH_NEWCOMER_SOCKET="+path)
	out, err := cmd.Output()
	line, _, _ := strings.Cut(string(out), "\n")
	if err != nil && line == "" {
		t.Fatalf("the newcomer's process: %v", err)
	}
	return strings.TrimSpace(line)
}

// needsReexec skips under -short: make arm64 runs the package under
// qemu-user with -short, where the test binary cannot execute itself; go
// test without -short (make test, CI) runs the test.
func needsReexec(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs this test binary again as a second process: not under -short")
	}
}

// TestMain runs this test binary as fromAnotherProcess's newcomer when
// it is asked to.
func TestMain(m *testing.M) {
	if path := os.Getenv("NEIGHWATCH_NEWCOMER_SOCKET"); path != "" {
		newcomer(path)
		return
	}
	os.Exit(m.Run())
}

// newcomer prints the status line of GET /v1/status on the socket at
// path, or what went wrong.
func newcomer(path string) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "GET /v1/status HTTP/1.1\r\nHost: neighwatch\r\nConnection: close\r\n\r\n"); err != nil {
		fmt.Println("write:", err)
		return
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		fmt.Println("read:", err)
		return
	}
	fmt.Print(line)
}

// TestSlotsGoToIdleConnections: through Server.Serve, with every slot
// taken by MaxSubscribers event streams and idle keep-alive connections,
// all older than the limiter's second, a newcomer is answered in the slot
// of an idle connection, and every stream still gets its events. Before
// Serve told the limiter which connections were being answered, every
// connection past a second counted as stalled, and the oldest, a live
// stream, was cut.
func TestSlotsGoToIdleConnections(t *testing.T) {
	needsReexec(t)
	tb := table.New(time.Minute, nil)
	tb.SetLinkName(2, "eth0")
	c, srv := serve(t, tb)
	streams := openStreams(t, c)
	for range MaxConnections - MaxSubscribers {
		conn, err := net.Dial("unix", c.path)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if code := rawRequest(t, conn, bufio.NewReader(conn), "/v1/status"); code != http.StatusOK {
			t.Fatalf("an idle client's request: %d", code)
		}
	}
	// Every connection past the second after which the limiter may take
	// one that has not finished a request.
	time.Sleep(1200 * time.Millisecond)
	if line := fromAnotherProcess(t, c.path); !strings.HasPrefix(line, "HTTP/1.1 200 ") {
		t.Fatalf("the newcomer with every slot held by streams and idle connections: %q, want 200 in an idle one's slot", line)
	}
	ip := netip.MustParseAddr("10.0.0.7")
	tb.Publish(table.Event{Time: time.Now(), Ifindex: 2, Family: table.FamilyInet, IP: ip, Kind: table.KindTransition,
		From: table.StateStale, To: table.StateReachable})
	for i, s := range streams {
		if ev, err := s.Next(); err != nil || ev.IP != ip.String() {
			t.Errorf("stream %d after the newcomer came: %+v, %v; want the event (a live stream is never taken)", i, ev, err)
		}
	}
	if st := srv.Stats(); st.Evicted != 1 {
		t.Errorf("the listener evicted %d connections, want the one idle connection whose slot the newcomer took", st.Evicted)
	}
}

// TestEverySlotAnsweredRefuses: through Server.Serve, with every slot
// held by a request being answered (MaxSubscribers event streams, the
// rest waiting on a heap profile's seconds), a newcomer reads the 503
// that says why, and none of them is cut.
func TestEverySlotAnsweredRefuses(t *testing.T) {
	needsReexec(t)
	tb := table.New(time.Minute, nil)
	c, srv := serve(t, tb)
	openStreams(t, c)
	type answer struct {
		code int
		err  error
	}
	answers := make(chan answer, MaxConnections)
	for range MaxConnections - MaxSubscribers {
		conn, err := net.Dial("unix", c.path)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /debug/pprof/heap?seconds=4 HTTP/1.1\r\nHost: neighwatch\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				answers <- answer{0, err}
				return
			}
			resp.Body.Close()
			answers <- answer{resp.StatusCode, nil}
		}()
	}
	// Every slot past its second, each being answered.
	time.Sleep(1200 * time.Millisecond)
	if line := fromAnotherProcess(t, c.path); !strings.HasPrefix(line, "HTTP/1.1 503 ") {
		t.Fatalf("the newcomer with every slot being answered read %q; want the 503", line)
	}
	for range MaxConnections - MaxSubscribers {
		if a := <-answers; a.err != nil || a.code != http.StatusOK {
			t.Errorf("a request being answered: %d, %v; want 200 (never cut)", a.code, a.err)
		}
	}
	if st := srv.Stats(); st.Evicted != 0 || st.RefusedTotal != 1 {
		t.Errorf("the listener evicted %d and refused %d, want none evicted and the newcomer refused", st.Evicted, st.RefusedTotal)
	}
}

// A client of the event stream that reads nothing loses no event until
// StreamBuffer of them wait for it: 16,000 changes published while it
// stalls, none dropped (with the old buffer of 1,024, about 15,000 would
// be, whatever the socket holds); then it reads every one.
func TestStreamHoldsABurstForAStalledClient(t *testing.T) {
	tb := table.New(time.Minute, nil)
	tb.SetLinkName(2, "eth0")
	c, _ := serve(t, tb)
	stream, err := c.OpenEvents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	const burst = 16000
	for i := range burst {
		ip := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		tb.Apply(table.CauseNetlink, table.Update{Family: table.FamilyInet, Ifindex: 2, State: table.StateStale, Addr: ip, LLAddr: net.HardwareAddr{2, 0, 0, 0, byte(i >> 8), byte(i)}})
	}
	if n := tb.Events().DroppedBy()[table.SubscriberStream]; n != 0 {
		t.Fatalf("%d of a burst of %d events dropped for a stalled client, want none (StreamBuffer %d)", n, burst, StreamBuffer)
	}
	for i := range burst {
		ev, err := stream.Next()
		if err != nil {
			t.Fatalf("event %d of %d: %v", i, burst, err)
		}
		if want := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).String(); ev.IP != want || ev.Kind != "transition" {
			t.Fatalf("event %d: %+v, want the creation of %s", i, ev, want)
		}
	}
}
