package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/lab"
	"golang.org/x/crypto/bcrypt"
)

// procFDs and procRSS read another process's open descriptors and RSS.
func procFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func procRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// agentPID is the agent's own PID: the command runs it through
// ip netns exec, which execs it, so they are one process.
func (a *agentProc) pid() int { return a.cmd.Process.Pid }

// TestStalledBodiesDoNotStarve: an unauthenticated client opens 5,000
// connections to /metrics (basic auth on) that send a request with
// Content-Length: 1000 and never the body, and keeps reopening them. An
// authenticated scrape from another address answers within 2 s and status
// within 1 s throughout; the agent's descriptors stay under the
// connection caps; its RSS comes back within 20 % once they close.
func TestStalledBodiesDoNotStarve(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "slw")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := runAgentCmd(t, l.Node, sock, l.Node.Command(binPath, "agent", "--metrics.listen", "0.0.0.0:9947", "--control.socket", sock,
		"--web.config.file", cfg, "--tracer", "off"))
	scrape := func(timeout time.Duration) error {
		var err error
		code := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			code, _, err = l.Node.HTTPGet("http://prom:s3cret@" + metricsAddr + "/metrics")
		}()
		select {
		case <-done:
		case <-time.After(timeout):
			return fmt.Errorf("no answer within %v", timeout)
		}
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		return err
	}
	lab.WaitFor(t, 60*time.Second, "the agent to serve authenticated scrapes", func() bool { return scrape(5*time.Second) == nil })
	pid := a.pid()
	// The starting value is the agent in service: scraped and asked for
	// its status a few times, as in its first minute under Prometheus.
	cold := procRSS(t, pid)
	for range 10 {
		if err := scrape(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := control.NewClient(sock).Status(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	fd0, rss0 := procFDs(t, pid), procRSS(t, pid)
	t.Logf("RSS %d kB at ready, %d kB after 10 scrapes and status calls", cold, rss0)

	// The attacker, in the client namespace, from 16 addresses: 16 x 8
	// (--web.max-connections-per-ip) fills the 64 slots of
	// --web.max-connections twice over.
	const conns, sources = 5000, 16
	for i := range sources {
		l.Client.MustIP(t, "addr", "add", fmt.Sprintf("10.0.1.%d/24", 100+i), "dev", lab.ClientIf)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var opened atomic.Int64
	stalled := "GET /metrics HTTP/1.1\r\nHost: node\r\nContent-Length: 1000\r\n\r\n"
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(10, 0, 1, byte(100+w%sources))}}
			for ctx.Err() == nil {
				var cs []net.Conn
				_ = l.Client.Do(func() error {
					for range conns / 50 {
						c, err := d.Dial("tcp", lab.NodeClientIP.String()+":9947")
						if err != nil {
							continue
						}
						_, _ = c.Write([]byte(stalled))
						cs = append(cs, c)
					}
					return nil
				})
				opened.Add(int64(len(cs)))
				// Hold them until the agent closes them, then open more.
				for _, c := range cs {
					_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
					buf := make([]byte, 512)
					for {
						if _, err := c.Read(buf); err != nil {
							break
						}
					}
					c.Close()
				}
			}
		}()
	}
	// Throughout the attack: authenticated scrapes and status.
	maxFD := 0
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		if err := scrape(2 * time.Second); err != nil {
			t.Errorf("authenticated scrape under attack: %v", err)
		}
		start := time.Now()
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		_, err := control.NewClient(sock).Status(sctx)
		scancel()
		if err != nil {
			t.Errorf("status under attack: %v (after %v)", err, time.Since(start))
		}
		maxFD = max(maxFD, procFDs(t, pid))
		time.Sleep(200 * time.Millisecond)
	}
	_, body, _ := l.Node.HTTPGet("http://prom:s3cret@" + metricsAddr + "/metrics")
	cancel()
	wg.Wait()
	const caps = 64 + 64 // --web.max-connections and the control socket's
	t.Logf("attacker opened %d connections; agent descriptors %d before, at most %d during; %s",
		opened.Load(), fd0, maxFD, grep(body, "http_connections_"))
	if maxFD > fd0+caps {
		t.Errorf("agent held %d descriptors, more than %d + its caps %d", maxFD, fd0, caps)
	}
	if opened.Load() < conns {
		t.Errorf("the attacker only opened %d connections: the test did not attack", opened.Load())
	}
	if strings.Contains(body, `neighwatch_http_connections_refused_total{listener="metrics",reason="total"} 0`) {
		t.Errorf("the attack never filled the metrics listener's 64 slots:\n%s", grep(body, "http_connections"))
	}
	t.Logf("RSS %d kB before, %d kB right after", rss0, procRSS(t, pid))
	// The agent returns a flood's memory to the OS within 10 s of its end
	// (see internal/agent/memory.go); wait for that, not for a time.
	lab.WaitFor(t, 60*time.Second, "the agent's RSS to come back within 20 %", func() bool {
		return procRSS(t, pid) <= rss0*12/10
	})
	t.Logf("RSS %d kB before, %d kB after", rss0, procRSS(t, pid))
}
