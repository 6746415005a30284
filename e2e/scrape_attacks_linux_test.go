package e2e

import (
	"context"
	"fmt"
	"io"
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
	"github.com/neighwatch/neighwatch/internal/dev/lab"
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

func procRSS(t *testing.T, pid int) int { return readStatusKB(t, pid, "VmRSS") }

// readStatusKB reads a field of /proc/PID/status in kB (VmRSS: the
// resident set; VmHWM: its peak).
func readStatusKB(tb testing.TB, pid int, field string) int {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.Atoi(f[1])
			return kb
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
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
// connection caps; its RSS comes back within 20 % once they close. Before
// the flood, one address alone past its share is refused at accept.
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
	// openStalled opens n connections from 10.0.1.src in the client
	// namespace, each sending headers and a Content-Length, never the
	// body; the ones the dial refused are left out.
	openStalled := func(src byte, n int) []net.Conn {
		const stalled = "GET /metrics HTTP/1.1\r\nHost: node\r\nContent-Length: 1000\r\n\r\n"
		var cs []net.Conn
		d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(10, 0, 1, src)}}
		_ = l.Client.Do(func() error {
			for range n {
				if c, err := d.Dial("tcp", lab.NodeClientIP.String()+":9947"); err == nil {
					_, _ = c.Write([]byte(stalled))
					cs = append(cs, c)
				}
			}
			return nil
		})
		return cs
	}
	refused := func(body, reason string) string {
		return metricValue(body, `neighwatch_http_connections_refused_total{listener="metrics",reason="`+reason+`"}`)
	}
	// One address alone first, while the listener has room: past its
	// share (--web.max-connections-per-ip, 8) the agent refuses it at
	// accept. In the flood below that need not show: the listener fills
	// from all 16 at once, and evictions keep their shares even.
	lab.WaitFor(t, 60*time.Second, "the agent to refuse connections past one address's share", func() bool {
		cs := openStalled(100, 12)
		defer func() {
			for _, c := range cs {
				c.Close()
			}
		}()
		// Accepted in order: by the time this scrape is answered, the 12
		// were let in or refused.
		code, b, err := l.Node.HTTPGet("http://prom:s3cret@" + metricsAddr + "/metrics")
		if err != nil || code != http.StatusOK {
			return false
		}
		v, err := strconv.ParseFloat(refused(b, "per-address"), 64)
		return err == nil && v >= 1
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var opened atomic.Int64
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cs := openStalled(byte(100+w%sources), conns/50)
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
	// Throughout the attack: authenticated scrapes and status, each
	// answered within what the slot rule promises (a stalled connection
	// gives its slot up after a second), stretched under emulation.
	scrapeBound, statusBound := lab.Patience(2*time.Second), lab.Patience(time.Second)
	maxFD, maxConns := 0, 0
	var body string
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		if err := scrape(scrapeBound); err != nil {
			t.Errorf("authenticated scrape under attack: %v", err)
		}
		start := time.Now()
		sctx, scancel := context.WithTimeout(context.Background(), statusBound)
		_, err := control.NewClient(sock).Status(sctx)
		scancel()
		if err != nil {
			t.Errorf("status under attack: %v (after %v)", err, time.Since(start))
		}
		maxFD = max(maxFD, procFDs(t, pid))
		if code, b, err := l.Node.HTTPGet("http://prom:s3cret@" + metricsAddr + "/metrics"); err == nil && code == http.StatusOK {
			body = b
			n, _ := strconv.Atoi(metricValue(b, `neighwatch_http_connections{listener="metrics"}`))
			maxConns = max(maxConns, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	const caps = 64 + 64 // --web.max-connections and the control socket's
	t.Logf("attacker opened %d connections; agent descriptors %d before, at most %d during; metrics connections at most %d; %s",
		opened.Load(), fd0, maxFD, maxConns, grep(body, "http_connections_"))
	if maxFD > fd0+caps {
		t.Errorf("agent held %d descriptors, more than %d + its caps %d", maxFD, fd0, caps)
	}
	if opened.Load() < conns {
		t.Errorf("the attacker only opened %d connections: the test did not attack", opened.Load())
	}
	// The slots were full: the gauge reached --web.max-connections, and
	// the refusals it forced are counted.
	if maxConns != 64 {
		t.Errorf("the metrics listener held at most %d connections during the attack, want all 64 slots taken", maxConns)
	}
	if v, err := strconv.ParseFloat(refused(body, "total"), 64); err != nil || v < 1 {
		t.Errorf("refusals on a full listener %q after 16 addresses opened %d connections, want at least one:\n%s", refused(body, "total"), opened.Load(), grep(body, "http_connections"))
	}
	t.Logf("RSS %d kB before, %d kB right after", rss0, procRSS(t, pid))
	// The agent returns a flood's memory to the OS within 10 s of its end
	// (see internal/agent/memory.go); wait for that, not for a time.
	lab.WaitFor(t, 60*time.Second, "the agent's RSS to come back within 20 %", func() bool {
		return procRSS(t, pid) <= rss0*12/10
	})
	t.Logf("RSS %d kB before, %d kB after", rss0, procRSS(t, pid))
}

// TestScrapesUnderAttackFromManyAddresses: an attacker with 1,000
// addresses (127.1.0.0/16 on the node's loopback) and no credentials
// stalls 8,000 connections (headers and a Content-Length, never the
// body), then floods reconnections as fast as this machine dials, then
// does both at once. Throughout, authenticated scrapes from 127.0.0.1
// answer 200 within 2 s, on a new connection each and on a kept-alive one
// that sits idle between scrapes (as a Prometheus server's does), and the
// real Prometheus scraping the agent never fails a scrape.
func TestScrapesUnderAttackFromManyAddresses(t *testing.T) {
	lab.Require(t)
	prom := requireProgram(t, "prometheus", "prometheus")
	t.Parallel()
	ns := lab.NewNS(t, "atk")
	ns.MustIP(t, "link", "set", "lo", "up")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	webCfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := runAgentCmd(t, ns, sock, ns.Command(binPath, "agent", "--metrics.listen", metricsAddr, "--control.socket", sock,
		"--web.config.file", webCfg, "--tracer", "off"))
	dialer := func(src net.IP) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() (err error) {
				d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: src}}
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}
	}
	// Two scrapers from 127.0.0.1: one keeps its connection alive between
	// scrapes, one opens a new connection for each.
	// Within 2 s (stretched under emulation): the slot rule gives a
	// stalled connection's slot to a newcomer after a second.
	bound := lab.Patience(2 * time.Second)
	kept := &http.Client{Timeout: bound, Transport: &http.Transport{DialContext: dialer(net.IPv4(127, 0, 0, 1))}}
	fresh := &http.Client{Timeout: bound, Transport: &http.Transport{DialContext: dialer(net.IPv4(127, 0, 0, 1)), DisableKeepAlives: true}}
	scrape := func(c *http.Client) error {
		req, _ := http.NewRequest("GET", "http://"+metricsAddr+"/metrics", nil)
		req.SetBasicAuth("prom", "s3cret")
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("after %v: %w", time.Since(start).Round(time.Millisecond), err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	lab.WaitFor(t, 30*time.Second, "the agent to answer authenticated scrapes", func() bool { return scrape(fresh) == nil })

	// The real Prometheus, scraping with the credentials.
	promCfg := `global:
  scrape_interval: 3s
scrape_configs:
  - job_name: neighwatch
    basic_auth: {username: prom, password: s3cret}
    static_configs:
      - targets: ['` + metricsAddr + `']
`
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startServer(t, ns, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "prom"),
		"--web.listen-address=127.0.0.1:9090")
	lab.WaitFor(t, 60*time.Second, "Prometheus to scrape the agent", func() bool {
		r, err := promQuery(ns, `up{job="neighwatch"} == 1`)
		return err == nil && len(r) == 1
	})

	src := func(i int) net.IP { return net.IPv4(127, 1, byte(i/250), byte(1+i%250)) }
	const addrs = 1000
	stall := func(ctx context.Context, opened *atomic.Int64) {
		var wg sync.WaitGroup
		req := []byte("GET /metrics HTTP/1.1\r\nHost: node\r\nContent-Length: 1000\r\n\r\n")
		for w := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					var cs []net.Conn
					for i := range 80 { // 10 addresses, 8 each
						c, err := dialer(src(w*10+i/8))(ctx, "tcp", metricsAddr)
						if err != nil {
							continue
						}
						_, _ = c.Write(req)
						cs = append(cs, c)
					}
					opened.Add(int64(len(cs)))
					for _, c := range cs { // until the agent closes them
						_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
						_, _ = io.Copy(io.Discard, c)
						c.Close()
					}
				}
			}()
		}
		wg.Wait()
	}
	flood := func(ctx context.Context, opened *atomic.Int64) {
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; ctx.Err() == nil; i += 32 {
					c, err := dialer(src(i%addrs))(ctx, "tcp", metricsAddr)
					if err == nil {
						opened.Add(1)
						c.Close()
					}
				}
			}()
		}
		wg.Wait()
	}
	// The listener's own counts, from an authenticated scrape whose error
	// is checked.
	counts := func() (evicted, refused int) {
		code, body, err := ns.HTTPGet("http://prom:s3cret@" + metricsAddr + "/metrics")
		if err != nil || code != http.StatusOK {
			t.Fatalf("scrape for the listener's counts: %d %v", code, err)
		}
		evicted, _ = strconv.Atoi(metricValue(body, `neighwatch_http_connections_evicted_total{listener="metrics"}`))
		refused, _ = strconv.Atoi(metricValue(body, `neighwatch_http_connections_refused_total{listener="metrics",reason="total"}`))
		return evicted, refused
	}
	for _, phase := range []struct {
		name    string
		attacks []func(context.Context, *atomic.Int64)
		full    bool // the attack fills the listener: stalled connections hold every slot
	}{{"stall", []func(context.Context, *atomic.Int64){stall}, true}, {"reconnect flood", []func(context.Context, *atomic.Int64){flood}, false},
		{"stall and flood", []func(context.Context, *atomic.Int64){stall, flood}, true}} {
		evicted0, refused0 := counts()
		ctx, cancel := context.WithCancel(context.Background())
		var opened atomic.Int64
		var wg sync.WaitGroup
		for _, atk := range phase.attacks {
			wg.Add(1)
			go func() { defer wg.Done(); atk(ctx, &opened) }()
		}
		var fails []string
		scrapes := 0
		start := time.Now()
		// Eight seconds at least, and on until the attacker has opened
		// 8,000 connections (a loaded machine dials slower), a minute
		// at most.
		for time.Since(start) < 8*time.Second || (opened.Load() < 8000 && time.Since(start) < time.Minute) {
			for name, c := range map[string]*http.Client{"kept-alive": kept, "new connection": fresh} {
				scrapes++
				if err := scrape(c); err != nil {
					fails = append(fails, fmt.Sprintf("%s at %v: %v", name, time.Since(start).Round(100*time.Millisecond), err))
				}
			}
			time.Sleep(500 * time.Millisecond) // the kept-alive connection idles in between
		}
		cancel()
		wg.Wait()
		evicted, refused := counts()
		t.Logf("%s: the attacker opened %d connections; %d of %d scrapes failed; the listener evicted %d and refused %d connections",
			phase.name, opened.Load(), len(fails), scrapes, evicted-evicted0, refused-refused0)
		for _, f := range fails {
			t.Errorf("%s: scrape failed: %s", phase.name, f)
		}
		if opened.Load() < 8000 {
			t.Errorf("%s: the attacker opened only %d connections", phase.name, opened.Load())
		}
		// The scrapes got through a full listener, not an idle one.
		if phase.full && (evicted == evicted0 || refused == refused0) {
			t.Errorf("%s: the listener evicted %d and refused %d connections: the attack never filled it", phase.name, evicted-evicted0, refused-refused0)
		}
	}
	// Prometheus never failed a scrape, attack or not.
	r, err := promQuery(ns, `min_over_time(up{job="neighwatch"}[5m])`)
	if err != nil || len(r) != 1 {
		t.Fatalf("Prometheus: %v %v", r, err)
	}
	if v := r[0]["value"].([]any)[1]; v != "1" {
		t.Errorf("Prometheus saw a failed scrape during the attacks: min(up) = %v", v)
	}
	_ = a
}
