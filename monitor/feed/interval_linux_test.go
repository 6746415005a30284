package feed

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/table"
)

// idleLinks is a mirror that has loaded its table: one watched interface.
type idleLinks struct {
	ready   chan struct{}
	ifindex int32
}

func (l idleLinks) Ready() <-chan struct{}               { return l.ready }
func (l idleLinks) Interfaces() map[int32]string         { return map[int32]string{l.ifindex: "v0"} }
func (l idleLinks) Lookup(keys []table.Key) (int, error) { return 0, nil }
func (l idleLinks) ResyncAfterHooks()                    {}

// idleFeed is a feed over n STALE entries, all stale-long, on a veth in a
// namespace of its own, with its tracer seeded and its per-packet hooks
// attached (window = period: attached while needed), as an agent sits on
// a large quiet L2 domain. Nothing happens on the wire.
func idleFeed(tb testing.TB, n int) *Feed {
	tb.Helper()
	ns := lab.NewNS(tb, "idl")
	ns.MustIP(tb, "link", "add", "v0", "type", "veth", "peer", "name", "v1")
	ns.MustIP(tb, "link", "set", "v0", "up")
	idx, err := ns.Ifindex("v0")
	if err != nil {
		tb.Fatal(err)
	}
	ino, err := bpf.NetNSInode("/run/netns/" + ns.Name)
	if err != nil {
		tb.Fatal(err)
	}
	tr, err := bpf.LoadTracer(bpf.TracerOptions{Mode: bpf.TracerXmit, NetNSIno: ino, InNetNS: ns.Do})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tr.Close() })
	tbl := table.New(time.Nanosecond, nil)
	tbl.SetLinkName(int32(idx), "v0")
	ups := make([]table.Update, 0, n)
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, byte(64 + i>>16), byte(i >> 8), byte(i)})
		ups = append(ups, table.Update{Ifindex: int32(idx), Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: lab.HostMAC(i, 0)})
	}
	tbl.Apply(table.CauseNetlink, ups...)
	time.Sleep(time.Millisecond)
	tbl.Advance()
	links := idleLinks{ready: make(chan struct{}), ifindex: int32(idx)}
	close(links.ready)
	f := New(tr, tbl, links, Config{Interval: time.Second, Window: time.Second, Period: time.Second})
	f.syncWatched()
	if _, err := f.seed(); err != nil {
		tb.Fatal(err)
	}
	if err := tr.SetPerPacket(true); err != nil {
		tb.Fatal(err)
	}
	return f
}

// BenchmarkIdleInterval is the work of one tracer interval (counters read,
// candidates kept in step, unmirrored entries retried) on an idle
// table of each size: it should cost in proportion to what changed,
// nothing here. Profile it with
//
//	go test ./monitor/feed -run '^$' -bench IdleInterval -benchtime 20x -cpuprofile cpu.out
func BenchmarkIdleInterval(b *testing.B) {
	lab.Require(b)
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := idleFeed(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				f.interval()
			}
		})
	}
}

// TestIdleIntervalAllocsDoNotGrow: the allocations of one interval on an
// idle table of 100,000 entries are those on one of 1,000.
func TestIdleIntervalAllocsDoNotGrow(t *testing.T) {
	lab.Require(t)
	allocs := map[int]float64{}
	for _, n := range []int{1000, 100000} {
		f := idleFeed(t, n)
		f.interval() // first call: buffers grow to size
		allocs[n] = testing.AllocsPerRun(5, func() {
			f.interval()
		})
	}
	t.Logf("allocations per idle interval: %v at 1,000 entries, %v at 100,000", allocs[1000], allocs[100000])
	if allocs[100000] > allocs[1000]+2 {
		t.Errorf("an idle interval allocates %v times at 100,000 entries against %v at 1,000: work in proportion to the table", allocs[100000], allocs[1000])
	}
}
