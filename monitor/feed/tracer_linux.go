package feed

import (
	"context"
	"net"
	"net/netip"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
)

// Tracer is the tracer as the feed calls it: the four small interfaces
// below, one for each part of the feed, and its mode, which a
// *bpf.Tracer has.
type Tracer interface {
	Hooks
	CandidateFilter
	Seeder
	Readout
	Mode() bpf.TracerMode
}

// Hooks switches the per-packet hooks and names the interfaces they
// watch (bpf.Hooks).
type Hooks interface {
	SetHooks(bypass, source bool) error
	SetPerPacket(on bool) error
	PerPacket() (bool, time.Duration)
	SetWatched(ifindexes []int, all bool) error
}

// CandidateFilter holds the source-MAC program's candidates and the
// epoch its announcements count in (bpf.CandidateFilter).
type CandidateFilter interface {
	UpdateCandidates(cs []bpf.Candidate) (notWatched int, err error)
	PruneCandidates(keep func(ifindex int, addr netip.Addr) bool) error
	Candidates() int
	BumpEpoch() error
}

// Seeder fills the in-kernel mirror from the table and counts it
// (bpf.Seeder).
type Seeder interface {
	Seed(entries []bpf.SeedEntry) (n int, unmirrored []bpf.HitKey, err error)
	Mirrored(k bpf.HitKey) bool
	RefreshMirrorSize()
}

// Readout is what the feed reads of the programs: their announcements,
// the counters they name, and the answer to a routed packet's question
// (bpf.Readout).
type Readout interface {
	ReadTransitions(ctx context.Context, fn func(bpf.SilentTransition), bad func(error)) error
	HitsOf(keys []bpf.HitKey, out map[bpf.HitKey]uint64) error
	HitKeys(buf []bpf.HitKey) ([]bpf.HitKey, error)
	DropHits(keys []bpf.HitKey) (int, error)
	SightingsOf(keys map[bpf.HitKey]net.HardwareAddr, out map[bpf.HitKey]bpf.Sighting) error
	NameGateway(ifindex int, family netip.Addr, mac net.HardwareAddr, addr netip.Addr) error
}
