package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/quote"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/remediate"
	"golang.org/x/sys/unix"
)

// datapathPart is the forwarding datapath on the interfaces the
// configuration names; dp is nil when none was asked for.
type datapathPart struct {
	dp   *bpf.Datapath
	auto bool // --datapath.mode=auto: remediation may swap to neigh
	log  *slog.Logger

	mu    sync.Mutex
	names map[int]string // ifindex -> name of interfaces with the datapath
}

var _ metrics.DatapathSource = (*datapathPart)(nil)

// attachDatapath loads the datapath and attaches it. It was asked for
// explicitly, so failing is an error.
func attachDatapath(cfg DatapathConfig, c caps, ml memlock, log *slog.Logger) (*datapathPart, error) {
	ifaces, mode := cfg.Interfaces, cfg.Mode
	d := &datapathPart{auto: cfg.Auto, log: log, names: make(map[int]string)}
	if len(ifaces) == 0 {
		return d, nil
	}
	if !c.bpf() || !c.has(unix.CAP_NET_ADMIN) {
		return nil, errors.New("--datapath.interfaces needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)")
	}
	dp, err := bpf.LoadDatapath()
	if line, ok := bpfRefusal(err, c, ml); ok {
		return nil, errors.New("datapath: " + line)
	}
	if err != nil {
		return nil, err
	}
	for _, name := range ifaces {
		ifi, err := net.InterfaceByName(name)
		if err != nil {
			dp.Close()
			return nil, fmt.Errorf("--datapath.interfaces: interface %s: %w", quote.Input(name), err)
		}
		if err := dp.Attach(ifi.Index, mode); err != nil {
			dp.Close()
			return nil, err
		}
		d.names[ifi.Index] = name
		log.Info("datapath attached", "interface", name, "mode", mode, "auto_swap", cfg.Auto, "skip_neigh", dp.SkipNeigh())
	}
	d.dp = dp
	return d, nil
}

// Counts implements metrics.DatapathSource.
func (d *datapathPart) Counts() (map[bpf.Decision]uint64, error) { return d.dp.Counts() }

// Modes implements metrics.DatapathSource and the control API's listing:
// the mode of each interface with the datapath, by its name now.
func (d *datapathPart) Modes() map[string]bpf.Mode {
	out := map[string]bpf.Mode{}
	if d.dp == nil {
		return out
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for idx, m := range d.dp.Attached() {
		// Follow renames: the name as the kernel has it now.
		if ifi, err := net.InterfaceByIndex(idx); err == nil && ifi.Name != d.names[idx] {
			d.names[idx] = ifi.Name
		}
		out[d.names[idx]] = m
	}
	return out
}

// SetMode swaps the datapath of a named interface.
func (d *datapathPart) SetMode(name string, m bpf.Mode) error {
	if d.dp == nil {
		return errors.New("no datapath is attached (start the agent with --datapath.interfaces)")
	}
	d.mu.Lock()
	idx := -1
	for i, n := range d.names {
		if n == name {
			idx = i
		}
	}
	d.mu.Unlock()
	if idx < 0 {
		return fmt.Errorf("interface %s has no datapath attached", quote.Input(name))
	}
	return d.dp.SetMode(idx, m)
}

// swapper is the swap strategy over this datapath (--datapath.mode=auto),
// or nil.
func (d *datapathPart) swapper() remediate.Swapper {
	if !d.auto || d.dp == nil {
		return nil
	}
	return remediate.NewDatapathSwapper(d.dp, d.name, d.log)
}

// name returns the name of an interface with the datapath.
func (d *datapathPart) name(ifindex int) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.names[ifindex]
}

// Close detaches the datapath: the kernel forwards normally again.
func (d *datapathPart) Close() error {
	if d.dp == nil {
		return nil
	}
	return d.dp.Close()
}
