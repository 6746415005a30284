package remediate

import (
	"log/slog"

	"github.com/neighwatch/neighwatch/bpf"
)

// Datapath is what the swap strategy needs of a forwarding datapath that
// runs in two modes (bpf.Datapath): which ingress interfaces last forwarded
// to an egress, which carry it, and the swap itself.
type Datapath interface {
	FeedsInto(egress int) ([]int, error)
	Attached() map[int]bpf.Mode
	Mode(ifindex int) bpf.Mode
	SetMode(ifindex int, m bpf.Mode) error
}

// DatapathSwapper is the swap strategy's policy over a Datapath: a stuck
// entry that receives bypass traffic on egress is served by moving the
// interfaces whose legacy datapath forwards to egress (bpf_fib_lookup +
// bpf_redirect, which never re-validates) to bpf_redirect_neigh, which
// lets the kernel resolve the neighbour. Where the datapath has no record
// of who forwards to egress, every interface still in legacy mode moves.
type DatapathSwapper struct {
	dp   Datapath
	name func(ifindex int) string // for the log
	log  *slog.Logger
}

var _ Swapper = (*DatapathSwapper)(nil)

// NewDatapathSwapper returns the swap policy over dp; name names an
// interface in the log.
func NewDatapathSwapper(dp Datapath, name func(ifindex int) string, log *slog.Logger) *DatapathSwapper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &DatapathSwapper{dp: dp, name: name, log: log}
}

// legacyFeeding returns the interfaces in legacy mode that feed egress.
func (s *DatapathSwapper) legacyFeeding(egress int32) []int {
	feeds, err := s.dp.FeedsInto(int(egress))
	if err != nil || len(feeds) == 0 {
		feeds = nil
		for i := range s.dp.Attached() {
			feeds = append(feeds, i)
		}
	}
	var out []int
	for _, i := range feeds {
		if s.dp.Mode(i) == bpf.ModeLegacy {
			out = append(out, i)
		}
	}
	return out
}

// CanSwap reports whether some interface whose legacy datapath feeds
// egress may be swapped.
func (s *DatapathSwapper) CanSwap(egress int32) bool { return len(s.legacyFeeding(egress)) > 0 }

// Swap moves each interface feeding egress to bpf_redirect_neigh,
// atomically (the datapath replaces the program in one step).
func (s *DatapathSwapper) Swap(egress int32) error {
	for _, in := range s.legacyFeeding(egress) {
		if err := s.dp.SetMode(in, bpf.ModeNeigh); err != nil {
			return err
		}
		s.log.Warn("datapath swapped to neigh (bpf_redirect_neigh): it forwards to an interface with a stuck entry that receives bypass traffic",
			"interface", s.name(in), "egress_ifindex", egress)
	}
	return nil
}
