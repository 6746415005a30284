package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/monitor/evidence"
	"golang.org/x/sys/unix"
)

// TestInterfaceChurn: 200 cycles of creating, using and deleting a veth
// with one name, while /metrics is scraped every 100 ms: no scrape fails,
// the table matches the kernel's afterwards, and the agent holds no more
// descriptors or goroutines than before.
func TestInterfaceChurn(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "chn")
	sock := sockPath(t)
	a := startAgent(t, ns, sock, "--log.level", "info")
	goroutines := func() string {
		return metricValue(a.metrics(t), "go_goroutines")
	}
	// Warm up: one cycle, so the first-use allocations are not growth.
	cycle := func(i int) []string {
		mac := lab.HostMAC(i, 7)
		return []string{
			"link add va type veth peer name vb",
			"link set va up",
			"link set vb up",
			"addr add 10.9.0.1/24 dev va",
			fmt.Sprintf("neigh add 10.9.0.2 lladdr %s dev va nud permanent", mac),
			fmt.Sprintf("neigh add 10.9.0.3 lladdr %s dev va nud stale", mac),
			fmt.Sprintf("neigh add fd00:9::3 lladdr %s dev va nud reachable", mac),
			"link del va",
		}
	}
	if err := ns.Batch(cycle(0)); err != nil {
		t.Fatal(err)
	}
	settle := func(what string) {
		t.Helper()
		var want, got []string
		deadline := time.Now().Add(60 * time.Second)
		for {
			kernel, err := ns.Neighbours()
			if err != nil {
				t.Fatal(err)
			}
			want, got = want[:0], got[:0]
			// IPv6 multicast entries are left out: the kernel creates them
			// without a netlink message, and the agent learns them from
			// the tracer's neigh_create or the periodic resync (the mirror
			// tests cover that); this test is about the churn.
			multicast := func(ip string) bool { return strings.HasPrefix(ip, "ff") }
			for _, n := range kernel {
				if !multicast(n.Dst) {
					want = append(want, n.Dev+" "+n.Dst+" "+strings.ToLower(n.LLAddr))
				}
			}
			for _, e := range statusJSON(t, sock) {
				if !multicast(e.IP) {
					got = append(got, e.Interface+" "+e.IP+" "+e.LLAddr)
				}
			}
			sort.Strings(want)
			sort.Strings(got)
			if strings.Join(want, ",") == strings.Join(got, ",") {
				return
			}
			if time.Now().After(deadline) {
				out, _ := ns.IPOutput("-d", "neigh", "show", "nud", "all")
				t.Fatalf("timed out after 60s waiting for %s\nkernel: %q\nagent:  %q\nip -d neigh:\n%s\n%s", what, want, got, out, grep(a.metrics(t), "netlink"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	settle("the table to match the kernel after the warm-up")
	pid := a.pid()
	fd0, g0 := procFDs(t, pid), goroutines()

	var mu sync.Mutex
	var scrapes int
	var failed []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			code, body, err := ns.HTTPGet("http://" + metricsAddr + "/metrics")
			mu.Lock()
			scrapes++
			if err != nil || code != http.StatusOK {
				failed = append(failed, fmt.Sprintf("%d %v %s", code, err, firstLine(body)))
			}
			mu.Unlock()
		}
	}()
	const cycles = 200
	for i := 1; i <= cycles; i++ {
		if err := ns.Batch(cycle(i)); err != nil {
			t.Fatal(err)
		}
	}
	// The last one stays, so the table has something to match.
	if err := ns.Batch(cycle(cycles + 1)[:7]); err != nil {
		t.Fatal(err)
	}
	settle("the table to match the kernel after the churn")
	time.Sleep(time.Second) // more scrapes after it settled
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Errorf("%d of %d scrapes failed during the churn; first: %s", len(failed), scrapes, failed[0])
	}
	if scrapes < 10 {
		t.Errorf("only %d scrapes: the test did not scrape during the churn", scrapes)
	}
	if err := ns.IP("link", "del", "va"); err != nil {
		t.Fatal(err)
	}
	settle("the table to match the kernel after the last deletion")
	// Descriptors and goroutines come back to where they were (a few of
	// either come and go with the scrapes themselves).
	var fd1 int
	var g1 string
	lab.WaitFor(t, 30*time.Second, "descriptors and goroutines back to their level before the churn", func() bool {
		fd1, g1 = procFDs(t, pid), goroutines()
		return fd1 <= fd0+2 && atoiOr(g1) <= atoiOr(g0)+3
	})
	t.Logf("%d cycles, %d scrapes, none failed; descriptors %d -> %d, goroutines %s -> %s", cycles, scrapes, fd0, fd1, g0, g1)
	if lines := grep(a.logs(), "level=WARN"); lines != "" {
		t.Logf("warnings:\n%s", lines)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// atoiOr reads a sample's value as an integer, 0 when it is none. The
// exposition writes a counter past a million as a float with an
// exponent (9.741355e+06), which it reads too.
func atoiOr(s string) int {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0
	}
	return int(f)
}

// TestListenerRetriedAfterEMFILE: with the agent out of descriptors, the
// ARP and NDP listeners of a new interface fail to start; they are counted
// and retried with backoff, and start once descriptors are free again.
func TestListenerRetriedAfterEMFILE(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "emf")
	sock := sockPath(t)
	a := startAgent(t, ns, sock, "--tracer", "off")
	pid := a.pid()
	listeners := func() (open, wanted, failures string) {
		body := a.metrics(t)
		return metricValue(body, `neighwatch_arp_listeners{state="open"}`), metricValue(body, `neighwatch_arp_listeners{state="wanted"}`),
			metricValue(body, "neighwatch_arp_listener_failures_total")
	}
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		t.Fatal(err)
	}
	// No new descriptor at all: the lowest free number is past 2 (a limit
	// just above the count would leave the gaps closed sockets left).
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 3, Max: old.Max}, nil); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &old, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	ns.MustIP(t, "link", "add", "ve", "type", "veth", "peer", "name", "vf")
	ns.MustIP(t, "link", "set", "ve", "up")
	// The agent has no descriptor to answer a scrape with: read its log.
	lab.WaitFor(t, 30*time.Second, "a listener start to fail", func() bool {
		return strings.Contains(a.logs(), "listener not started; retrying")
	})
	restore()
	lab.WaitFor(t, 30*time.Second, "the listeners to start on a retry", func() bool {
		open, wanted, _ := listeners()
		return open != "" && open == wanted
	})
	open, wanted, failures := listeners()
	if atoiOr(failures) == 0 {
		t.Errorf("failed listener starts not counted")
	}
	t.Logf("listeners open %s of %s wanted after %s failed starts\n%s", open, wanted, failures, grep(a.logs(), "listener"))
}

// floodARP sends n ARP requests from random sender IPs and MACs to
// broadcast from dev in ns, as fast as it can.
func floodARP(t *testing.T, ns lab.NS, dev string, n int) {
	t.Helper()
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
		frame := make([]byte, 42)
		copy(frame[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		binary.BigEndian.PutUint16(frame[12:], unix.ETH_P_ARP)
		copy(frame[14:22], []byte{0, 1, 8, 0, 6, 4, 0, 1}) // Ethernet/IPv4, request
		for i := range n {
			mac := [6]byte{0x02, 0x99, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
			copy(frame[6:12], mac[:])
			copy(frame[22:28], mac[:])
			copy(frame[28:32], []byte{10, 128 | byte(i>>16), byte(i >> 8), byte(i)}) // sender: 10.128.0.0/9
			copy(frame[38:42], []byte{10, 0, 1, 250})                                // target: nobody
			if err := unix.Sendto(fd, frame, 0, sa); err != nil {
				if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
					continue
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestARPFloodThenConflict: 500,000 ARP frames from random senders fill
// the evidence map; the least recently seen are evicted (and counted), the
// kernel's socket drops are exported, and a real conflict afterwards is
// still detected.
func TestARPFloodThenConflict(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "fld")
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--tracer", "off")
	a.waitPart(t, "evidence")
	const frames = 500_000
	start := time.Now()
	floodARP(t, l.Client, lab.ClientIf, frames)
	took := time.Since(start)
	// Every flood frame read or dropped first: announcements sent while
	// the socket's buffer is still full of the flood would be dropped too.
	lab.WaitFor(t, 60*time.Second, "the flood read or dropped", func() bool {
		body := a.metrics(t)
		return arpCounted(body)+atoiOr(metricValue(body, `neighwatch_arp_socket_drops_total{interface="n0"}`)) >= frames
	})
	// The real conflict: the client's IP answered from two MACs in turn.
	macA, macB := lab.HostMAC(1, 0x31), lab.HostMAC(2, 0x31)
	for _, mac := range []net.HardwareAddr{macA, macB, macA} {
		if err := l.Client.AnnounceARP(lab.ClientIf, lab.ClientIP, mac, 1); err != nil {
			t.Fatal(err)
		}
	}
	lab.WaitFor(t, 30*time.Second, "the conflict to be counted", func() bool {
		return atoiOr(metricValue(a.metrics(t), `neighwatch_arp_conflicts_total{interface="n0"}`)) >= 1
	})
	body := a.metrics(t)
	evicted := atoiOr(metricValue(body, `neighwatch_arp_hosts_evicted_total{reason="full"}`))
	hosts := metricValue(body, "neighwatch_arp_hosts")
	drops := metricValue(body, `neighwatch_arp_socket_drops_total{interface="n0"}`)
	counted := arpCounted(body)
	if evicted == 0 || drops == "" || hosts != strconv.Itoa(evidence.DefaultMaxHosts) {
		t.Errorf("evicted %d, hosts %s, socket drops %q: want evictions, a full map and the drops series\n%s", evicted, hosts, drops, grep(body, "neighwatch_arp_"))
	}
	t.Logf("%d frames sent in %v (%.0f/s); counted %d, dropped by the kernel (socket buffer full) %s; %d hosts evicted, %s kept; agent RSS %d kB",
		frames, took.Round(time.Millisecond), frames/took.Seconds(), counted, drops, evicted, hosts, procRSS(t, a.pid()))
}

// arpCounted is the ARP frames the agent read on n0, of every kind.
func arpCounted(body string) int {
	n := 0
	for _, k := range []string{"request", "reply", "gratuitous"} {
		n += atoiOr(metricValue(body, `neighwatch_arp_packets_total{interface="n0",kind="`+k+`"}`))
	}
	return n
}
