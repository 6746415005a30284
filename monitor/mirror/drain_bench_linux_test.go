package mirror

import (
	"fmt"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/monitor/internal/nsenter"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// BenchmarkDrainInterleaved measures how fast queued neighbour
// notifications are applied to the table, against a bare vishvananda
// subscriber draining the same burst, alternating the two in every
// iteration so both see the same machine state. Method as in
// benchmarking.md: a 256 MiB receive buffer is filled first (200,000
// lladdr changes made with ip -batch while nobody reads), then drained
// and timed. Reports events/s for each and their ratio.
//
//	go test ./monitor/mirror -run '^$' -bench DrainInterleaved -benchtime 5x
func BenchmarkDrainInterleaved(b *testing.B) {
	if ok, why := lab.Privileged(); !ok {
		b.Skip(why)
	}
	ns := lab.NewNS(b, "drn")
	ns.MustIP(b, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
	ns.MustIP(b, "link", "set", "v0", "up")
	h, err := ns.Handle()
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	const hosts, rounds = 2000, 100
	batch := func(iter, path int) []string {
		lines := make([]string, 0, hosts*rounds)
		for r := 0; r < rounds; r++ {
			for i := 0; i < hosts; i++ {
				lines = append(lines, fmt.Sprintf("neigh replace %s lladdr %s dev v0 nud permanent",
					lab.HostIP(100, i), lab.HostMAC(i, (iter*2+path)*rounds+r)))
			}
		}
		return lines
	}
	var monRate, bareRate, ratios []float64
	for it := 0; it < b.N; it++ {
		mr := drainMonitor(b, ns, h, batch(it, 0))
		br := drainBare(b, ns, h, batch(it, 1))
		monRate = append(monRate, mr)
		bareRate = append(bareRate, br)
		ratios = append(ratios, mr/br)
	}
	b.ReportMetric(median(monRate), "monitor-events/s")
	b.ReportMetric(median(bareRate), "bare-events/s")
	b.ReportMetric(median(ratios), "monitor/bare")
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

func drainMonitor(b *testing.B, ns lab.NS, h netns.NsHandle, lines []string) float64 {
	b.Helper()
	m := New(Config{NetNS: &h}, table.New(time.Minute, nil))
	var sock *nlSocket
	if err := nsenter.Run(h, func() error {
		var err error
		if m.handle, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
			return err
		}
		sock, err = openNeighSocket(256 << 20)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer m.handle.Close()
	defer sock.Close()
	links, _ := m.handle.LinkList()
	for _, l := range links {
		m.updateLink(l, false)
	}
	if err := ns.Batch(lines); err != nil {
		b.Fatal(err)
	}
	_ = sock.f.SetReadDeadline(time.Now().Add(60 * time.Second))
	batch := make([]table.Update, 0, 256)
	start := time.Now()
	for m.c[Messages].Load() < uint64(len(lines)) {
		d, err := sock.recv()
		if err != nil {
			b.Fatalf("after %d of %d events: %v", m.c[Messages].Load(), len(lines), err)
		}
		if _, _, err := m.processDatagram(d, 0, false, &batch); err != nil {
			b.Fatal(err)
		}
	}
	return float64(len(lines)) / time.Since(start).Seconds()
}

func drainBare(b *testing.B, ns lab.NS, h netns.NsHandle, lines []string) float64 {
	b.Helper()
	ch := make(chan netlink.NeighUpdate) // unbuffered: the library's reader blocks, the socket fills
	done := make(chan struct{})
	var cbErr error
	if err := netlink.NeighSubscribeWithOptions(ch, done, netlink.NeighSubscribeOptions{
		Namespace: &h, ReceiveBufferSize: 256 << 20, ReceiveBufferForceSize: true,
		ErrorCallback: func(err error) { cbErr = err },
	}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		close(done)
		for range ch {
		}
	}()
	if err := ns.Batch(lines); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	timeout := time.After(60 * time.Second)
	for n := 0; n < len(lines); n++ {
		select {
		case _, ok := <-ch:
			if !ok {
				b.Fatalf("bare subscriber closed after %d events: %v", n, cbErr)
			}
		case <-timeout:
			b.Fatalf("bare subscriber drained %d of %d", n, len(lines))
		}
	}
	return float64(len(lines)) / time.Since(start).Seconds()
}
