package connlimit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary be a second process: a newcomer of its
// own on a Unix socket (CONNLIMIT_GET=path: one GET, its status printed).
func TestMain(m *testing.M) {
	if path := os.Getenv("CONNLIMIT_GET"); path != "" {
		os.Exit(getOnce(path))
	}
	os.Exit(m.Run())
}

func getOnce(path string) int {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		fmt.Println(0, err)
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		fmt.Println(0, err)
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		fmt.Println(0, err)
		return 0
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, body)
	return 0
}

// getFromAnotherProcess sends one GET on the Unix socket at path from a
// process of its own, and returns its status (0: closed without one) and
// body.
func getFromAnotherProcess(t *testing.T, path string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CONNLIMIT_GET="+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the other process: %v: %s", err, out)
	}
	var code int
	var rest string
	if _, err := fmt.Sscanf(string(out), "%d", &code); err != nil {
		t.Fatalf("the other process said %q", out)
	}
	_, rest, _ = strings.Cut(string(out), " ")
	return code, rest
}

// serveUnix runs an http.Server on a Unix socket bounded to max, as the
// control socket is: no client trusted for its answers, refusals told why.
func serveUnix(t *testing.T, max int, grace time.Duration, h http.HandlerFunc) (*Listener, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l := Wrap(ln, max, max)
	l.grace = grace
	l.TrustNone()
	l.RefuseWith([]byte("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 9\r\n\r\nall busy\n"))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	l.Serve(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l, path
}

func dialUnix(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestUnixSocketEvicts: on a Unix socket every client is keyed by its
// peer process, so the eviction rules apply there too: one process's
// idle keep-alive connections, answered with success, and its stalled
// ones lose their slots to a newcomer after the grace (before, a Unix
// socket's connections had no client, and 64 idle ones locked everyone
// out until the server's idle timeout); a newcomer that finds every slot
// being answered reads why it was refused.
func TestUnixSocketEvicts(t *testing.T) {
	release := make(chan struct{})
	l, path := serveUnix(t, 4, 50*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
	})
	held := []net.Conn{dialUnix(t, path)} // stalled: sends nothing
	waitOpen(t, l, 1)
	l.mu.Lock()
	key := l.all[0].cl
	l.mu.Unlock()
	if key == nil || !strings.HasPrefix(key.key, "pid ") {
		t.Fatalf("a Unix socket's connection has client %+v, want its peer process", key)
	}

	// Idle keep-alive connections, each answered 200.
	for range 3 {
		c := dialUnix(t, path)
		held = append(held, c)
		if code := get(t, c); code != http.StatusOK {
			t.Fatalf("filling: %d", code)
		}
	}
	waitOpen(t, l, 4)
	time.Sleep(100 * time.Millisecond) // past the grace
	if code, body := getFromAnotherProcess(t, path); code != http.StatusOK {
		t.Fatalf("a newcomer behind another process's idle and stalled connections got %d %q, want 200", code, body)
	}
	if s := l.Stats(); s.Evicted != 1 || s.RefusedTotal != 0 {
		t.Errorf("stats %+v, want one connection evicted, none refused", s)
	}

	// Every slot being answered: the newcomer is refused, and told.
	for _, c := range held {
		c.Close()
	}
	waitOpen(t, l, 0)
	for range 4 {
		c := dialUnix(t, path)
		if _, err := c.Write([]byte("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		serving := 0
		for _, c := range l.all {
			if c.serving {
				serving++
			}
		}
		l.mu.Unlock()
		if serving == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections being answered, want 4", serving)
		}
		time.Sleep(time.Millisecond)
	}
	if code, body := getFromAnotherProcess(t, path); code != http.StatusServiceUnavailable || !strings.Contains(body, "all busy") {
		t.Errorf("the refused client read %d %q, want 503 and why", code, body)
	}
	if s := l.Stats(); s.RefusedTotal != 1 {
		t.Errorf("stats %+v, want one refused", s)
	}
	close(release)
}
