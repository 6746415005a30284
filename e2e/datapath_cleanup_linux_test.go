package e2e

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// datapathHandle is the handle of the datapath's cls_bpf filter
// (bpf/tc_linux.go's slotDatapath).
const datapathHandle = 0x6e02

// TestKilledAgentLeavesNoDatapath: links are not pinned, so SIGKILL takes
// the datapath with the process and the kernel forwards as before.
func TestKilledAgentLeavesNoDatapath(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "kil")
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--datapath.interfaces", lab.NodeBackendIf, "--tracer", "xmit")
	n1, err := l.Node.Ifindex(lab.NodeBackendIf)
	if err != nil {
		t.Fatal(err)
	}
	// The datapath's programs on n1's ingress, asked of the kernel in the
	// node: tcx links of dp_* programs, or (before 6.6) cls_bpf filters
	// at the datapath's handle on clsact. The tracer's source-MAC program
	// sits on the same ingress while a STALE entry needs it, so it is told
	// apart by name (tcx) or handle (clsact); all counts every tcx program.
	attached := func() (tcx, clsact, all int) {
		if err := l.Node.Do(func() error {
			res, err := link.QueryPrograms(link.QueryOptions{Target: n1, Attach: ebpf.AttachTCXIngress})
			if err == nil {
				all = len(res.Programs)
				for _, p := range res.Programs {
					prog, err := ebpf.NewProgramFromID(p.ID)
					if err != nil {
						continue // detached meanwhile
					}
					info, err := prog.Info()
					prog.Close()
					if err == nil && strings.HasPrefix(info.Name, "dp_") {
						tcx++
					}
				}
			} else if !errors.Is(err, ebpf.ErrNotSupported) && !errors.Is(err, unix.EINVAL) {
				return err // before 6.6 the kernel answers EINVAL: no tcx
			}
			filters, _ := netlink.FilterList(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Index: n1}}, netlink.HANDLE_MIN_INGRESS)
			for _, f := range filters {
				if f.Attrs().Handle == datapathHandle {
					clsact++
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return
	}
	tcx, clsact, _ := attached()
	if tcx+clsact != 1 {
		t.Fatalf("%d datapath programs on n1's tcx ingress and %d datapath clsact filters, want one", tcx, clsact)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	a.done <- nil
	if tcx == 1 {
		// tcx: the kernel detaches the link when the process dies.
		lab.WaitFor(t, 5*time.Second, "every tcx program detached after SIGKILL", func() bool {
			_, _, all := attached()
			return all == 0
		})
	} else {
		// clsact: the filter stays (and forwards) until the next start
		// takes it away.
		if _, n, _ := attached(); n != 1 {
			t.Fatalf("%d datapath clsact filters after SIGKILL, want the datapath's", n)
		}
		a2 := startAgent(t, l.Node, sock, "--tracer", "off")
		if !strings.Contains(a2.logs(), "removed an earlier agent's clsact filters") {
			t.Errorf("the next agent did not say it removed the filter:\n%s", a2.logs())
		}
		if _, n, _ := attached(); n != 0 {
			t.Fatalf("%d datapath clsact filters after the next start, want none", n)
		}
	}
	if err := l.Client.Ping(lab.BackendIP, 2, 2*time.Second); err != nil {
		t.Fatalf("kernel forwarding after the agent died: %v", err)
	}
	t.Logf("datapath on tcx: %d, on clsact: %d; gone after the agent died (and, on clsact, the next started)", tcx, clsact)
}
