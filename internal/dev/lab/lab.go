package lab

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	neturl "net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf/rlimit"
	"github.com/neighwatch/neighwatch/internal/kver"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Addresses of the lab. Interface names are the same in every lab: each
// lab has its own namespaces.
var (
	ClientIP       = netip.MustParseAddr("10.0.1.2")
	NodeClientIP   = netip.MustParseAddr("10.0.1.1")
	NodeBackendIP  = netip.MustParseAddr("10.0.2.1")
	BackendIP      = netip.MustParseAddr("10.0.2.2")
	ClientIP6      = netip.MustParseAddr("fd00:1::2")
	NodeClientIP6  = netip.MustParseAddr("fd00:1::1")
	NodeBackendIP6 = netip.MustParseAddr("fd00:2::1")
	BackendIP6     = netip.MustParseAddr("fd00:2::2")
)

// Interface names.
const (
	ClientIf      = "c0" // in client, towards node
	NodeClientIf  = "n0" // in node, towards client
	NodeBackendIf = "n1" // in node, towards backend
	BackendIf     = "b0" // in backend, towards node
)

// NS is one network namespace of a lab.
type NS struct {
	Name string
}

// Lab is a client <-> node <-> backend network.
type Lab struct {
	Client, Node, Backend NS
	namespaces            []string
}

// Privileged reports whether the process can build labs, and why not.
func Privileged() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "needs root (network namespaces, veth, raw sockets)"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return false, "needs ip(8) from iproute2"
	}
	return true, ""
}

// Require skips the test under -short (make unit) and where a lab cannot
// be built, except in CI (CI=true), where it never skips: a missing
// privilege is a failure there, -short or not.
func Require(tb testing.TB) {
	tb.Helper()
	ok, why := Privileged()
	switch {
	case os.Getenv("CI") == "true":
		if !ok {
			tb.Fatalf("privileged test cannot run in CI: %s", why)
		}
	case testing.Short():
		// make unit: the pure tests only, whoever runs them.
		tb.Skip("privileged lab test skipped under -short (CI=true runs it)")
	case !ok:
		tb.Skipf("skipping privileged test: %s (CI=true fails instead)", why)
	}
	// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK, as the agent
	// knows (it raises the limit); tests that load programs themselves
	// need the same.
	memlock.Do(func() { _ = rlimit.RemoveMemlock() })
}

var memlock sync.Once

// Patience stretches a bound on how long to wait for something by
// NEIGHWATCH_TIME_SCALE (default 1): the kernel matrix sets it for guests
// that run under emulation, where everything takes several times longer:
// the agent's own timers too, so the bounds on what it promises
// (detection within the threshold plus a period) are stretched there as
// well. The promise itself is measured on the host's kernel (README,
// Precision), where the scale is 1.
func Patience(d time.Duration) time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("NEIGHWATCH_TIME_SCALE"), 64); err == nil && f > 1 {
		return time.Duration(float64(d) * f)
	}
	return d
}

// KernelAtLeast reports whether the running kernel's release is at least
// major.minor, and the release, from uname(2): for tests that must know
// what the kernel gives independently of what the agent says.
func KernelAtLeast(major, minor int) (bool, string) {
	ok, rel, err := kver.AtLeast(major, minor)
	if err != nil && rel == "" {
		return false, "unknown: " + err.Error()
	}
	return ok, rel
}

// Unique returns prefix plus a random suffix, for names that must not
// collide between tests running in parallel.
func Unique(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// NewNS creates a bare namespace with loopback up.
func NewNS(tb testing.TB, prefix string) NS {
	tb.Helper()
	ns := NS{Name: Unique("nw" + prefix)}
	if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
		tb.Fatalf("ip netns add %s: %v: %s", ns.Name, err, out)
	}
	tb.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns.Name).Run() })
	ns.MustIP(tb, "link", "set", "lo", "up")
	return ns
}

// New builds a lab. prefix shows up in namespace names (keep it short).
// Cleanup is registered on tb.
func New(tb testing.TB, prefix string) *Lab {
	tb.Helper()
	l, err := Build(prefix)
	if err != nil {
		tb.Fatalf("build lab: %v", err)
	}
	tb.Cleanup(l.Close)
	return l
}

// Build builds a lab without a testing.TB; the caller must Close it.
func Build(prefix string) (*Lab, error) {
	base := Unique("nw" + prefix)
	l := &Lab{Client: NS{base + "-c"}, Node: NS{base + "-n"}, Backend: NS{base + "-b"}}
	for _, ns := range []NS{l.Client, l.Node, l.Backend} {
		if out, err := exec.Command("ip", "netns", "add", ns.Name).CombinedOutput(); err != nil {
			l.Close()
			return nil, fmt.Errorf("ip netns add %s: %v: %s", ns.Name, err, out)
		}
		l.namespaces = append(l.namespaces, ns.Name)
	}
	// One ip(8) a namespace, each a batch: the node's after the two
	// whose veths reach into it. Under an emulated guest a process costs
	// tenths of a second, and every lab-built test paid for 24 of them.
	// The client and the backend are alike: a veth into the node, an
	// address of each family, the node as their gateway.
	end := func(ifc, peer string, ip4, ip6, gw4, gw6 netip.Addr) []string {
		return []string{
			"link set lo up",
			"link add " + ifc + " type veth peer name " + peer + " netns " + l.Node.Name,
			"addr add " + ip4.String() + "/24 dev " + ifc,
			"addr add " + ip6.String() + "/64 dev " + ifc + " nodad",
			"link set " + ifc + " up",
			"route add default via " + gw4.String(),
			"route add default via " + gw6.String(),
		}
	}
	for _, b := range []struct {
		ns    NS
		lines []string
	}{
		{l.Client, end(ClientIf, NodeClientIf, ClientIP, ClientIP6, NodeClientIP, NodeClientIP6)},
		{l.Backend, end(BackendIf, NodeBackendIf, BackendIP, BackendIP6, NodeBackendIP, NodeBackendIP6)},
		{l.Node, []string{
			"link set lo up",
			"addr add " + NodeClientIP.String() + "/24 dev " + NodeClientIf,
			"addr add " + NodeClientIP6.String() + "/64 dev " + NodeClientIf + " nodad",
			"addr add " + NodeBackendIP.String() + "/24 dev " + NodeBackendIf,
			"addr add " + NodeBackendIP6.String() + "/64 dev " + NodeBackendIf + " nodad",
			"link set " + NodeClientIf + " up",
			"link set " + NodeBackendIf + " up",
		}},
	} {
		if err := b.ns.Batch(b.lines); err != nil {
			l.Close()
			return nil, err
		}
	}
	for _, kv := range [][2]string{{"net.ipv4.ip_forward", "1"}, {"net.ipv6.conf.all.forwarding", "1"}} {
		if err := l.Node.Sysctl(kv[0], kv[1]); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// Close deletes the lab's namespaces and with them every link in them.
func (l *Lab) Close() {
	for _, n := range l.namespaces {
		_ = exec.Command("ip", "netns", "del", n).Run()
	}
	l.namespaces = nil
}

// IP runs ip(8) in the namespace.
func (n NS) IP(args ...string) error {
	_, err := n.IPOutput(args...)
	return err
}

// IPOutput runs ip(8) in the namespace and returns its output.
func (n NS) IPOutput(args ...string) (string, error) {
	full := append([]string{"-n", n.Name}, args...)
	var stderr bytes.Buffer
	cmd := exec.Command("ip", full...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %v: %s", strings.Join(full, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// MustIP is IP that fails tb on error.
func (n NS) MustIP(tb testing.TB, args ...string) {
	tb.Helper()
	if err := n.IP(args...); err != nil {
		tb.Fatal(err)
	}
}

// Exec runs a command in the namespace and returns its combined output.
func (n NS) Exec(name string, args ...string) (string, error) {
	full := append([]string{"netns", "exec", n.Name, name}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %v: %s", name, strings.Join(args, " "), n.Name, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Command returns an unstarted command that runs in the namespace.
func (n NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Sysctl sets a sysctl inside the namespace: it writes
// /proc/sys/KEY from a thread in the namespace, which is where
// /proc/sys/net leads then (no sysctl(8) in an ip netns exec).
func (n NS) Sysctl(key, value string) error {
	p := "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
	if err := n.Do(func() error { return os.WriteFile(p, []byte(value), 0o644) }); err != nil {
		return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, n.Name, err)
	}
	return nil
}

// Handle opens the namespace; the caller closes it.
func (n NS) Handle() (netns.NsHandle, error) { return netns.GetFromName(n.Name) }

// MAC returns an interface's MAC address.
func (n NS) MAC(dev string) (net.HardwareAddr, error) {
	out, err := n.IPOutput("-j", "link", "show", "dev", dev)
	if err != nil {
		return nil, err
	}
	var links []struct {
		Address string `json:"address"`
		Ifindex int    `json:"ifindex"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return nil, fmt.Errorf("parse ip link output %q: %v", out, err)
	}
	return net.ParseMAC(links[0].Address)
}

// Ifindex returns an interface's index.
func (n NS) Ifindex(dev string) (int, error) {
	out, err := n.IPOutput("-j", "link", "show", "dev", dev)
	if err != nil {
		return 0, err
	}
	var links []struct {
		Ifindex int `json:"ifindex"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return 0, fmt.Errorf("parse ip link output %q: %v", out, err)
	}
	return links[0].Ifindex, nil
}

// SetNeigh replaces a neighbour entry: state is an ip(8) nud name
// ("permanent", "stale", "reachable", "noarp", ...).
func (n NS) SetNeigh(dev string, ip netip.Addr, mac net.HardwareAddr, state string, extra ...string) error {
	args := []string{"neigh", "replace", ip.String(), "lladdr", mac.String(), "dev", dev, "nud", state}
	return n.IP(append(args, extra...)...)
}

// NeighJSON is one entry as `ip -j neigh show nud all` prints it.
type NeighJSON struct {
	Dst    string    `json:"dst"`
	Dev    string    `json:"dev"`
	LLAddr string    `json:"lladdr"`
	State  []string  `json:"state"`
	Router *struct{} `json:"router"`
}

// Neighbours returns the namespace's neighbour entries as ip(8) sees them.
func (n NS) Neighbours() ([]NeighJSON, error) {
	out, err := n.IPOutput("-j", "neigh", "show", "nud", "all")
	if err != nil {
		return nil, err
	}
	var ns []NeighJSON
	if strings.TrimSpace(out) == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(out), &ns); err != nil {
		return nil, fmt.Errorf("parse ip -j neigh output: %w", err)
	}
	return ns, nil
}

// Batch feeds commands to `ip -n NS -batch -`, one per line, and returns
// when all ran: the fastest way to make many neighbour changes.
func (n NS) Batch(lines []string) error {
	cmd := exec.Command("ip", "-n", n.Name, "-force", "-batch", "-")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -batch in %s: %v: %s", n.Name, err, firstLines(string(out), 5))
	}
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// HostIP returns the i-th address of a /16 inside 10.(base).0.0, for bulk
// entries; i < 65024.
func HostIP(base byte, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, base, byte(i / 254), byte(i%254 + 1)})
}

// HostMAC returns a locally administered MAC derived from i and round.
func HostMAC(i, round int) net.HardwareAddr {
	return net.HardwareAddr{0x02, byte(round), byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
}

// MoveClientMAC gives the client a new MAC "behind the node's back": the
// client's entry for the node is static, so the client sends no ARP that
// would tell the node. This stands in for a replaced VM behind switches
// that suppress ARP.
func (l *Lab) MoveClientMAC(mac net.HardwareAddr) error {
	nodeMAC, err := l.Node.MAC(NodeClientIf)
	if err != nil {
		return err
	}
	// A new address flushes the client's neighbour entries, its pins for
	// the node too, so traffic it sends before they are back would ask
	// for the node from the new MAC, and the node would learn the move
	// from that request: the switch that suppresses ARP in problem.md is
	// gone for a moment. The client solicits nothing meanwhile.
	restore, err := l.Client.quiet(ClientIf)
	if err != nil {
		return err
	}
	if err := l.Client.IP("link", "set", "dev", ClientIf, "address", mac.String()); err != nil {
		return errors.Join(err, restore())
	}
	if err := l.Client.SetNeigh(ClientIf, NodeClientIP, nodeMAC, "permanent"); err != nil {
		return errors.Join(err, restore())
	}
	if err := l.Client.SetNeigh(ClientIf, NodeClientIP6, nodeMAC, "permanent"); err != nil {
		return errors.Join(err, restore())
	}
	return restore()
}

// quiet stops dev from sending ARP requests and neighbour solicitations
// (answers still go out) until restore puts the settings back.
func (n NS) quiet(dev string) (restore func() error, err error) {
	var keys, was []string
	for _, fam := range []string{"ipv4", "ipv6"} {
		for _, k := range []string{"mcast_solicit", "ucast_solicit"} {
			key := "net." + fam + ".neigh." + dev + "." + k
			out, err := n.Exec("sysctl", "-n", key)
			if err != nil {
				return nil, err
			}
			keys, was = append(keys, key), append(was, strings.TrimSpace(out))
		}
	}
	restore = func() error {
		var errs []error
		for i, k := range keys {
			errs = append(errs, n.Sysctl(k, was[i]))
		}
		return errors.Join(errs...)
	}
	for _, k := range keys {
		if err := n.Sysctl(k, "0"); err != nil {
			return nil, errors.Join(err, restore())
		}
	}
	return restore, nil
}

// PinClientToNode makes the client's entries for the node static, so the
// client never ARPs for the node.
func (l *Lab) PinClientToNode() error {
	nodeMAC, err := l.Node.MAC(NodeClientIf)
	if err != nil {
		return err
	}
	if err := l.Client.SetNeigh(ClientIf, NodeClientIP, nodeMAC, "permanent"); err != nil {
		return err
	}
	return l.Client.SetNeigh(ClientIf, NodeClientIP6, nodeMAC, "permanent")
}

// ErrNoEntry is returned by Entry when the entry does not exist.
var ErrNoEntry = errors.New("no such neighbour entry")

// Entry returns one entry as ip(8) sees it.
func (n NS) Entry(dev string, ip netip.Addr) (NeighJSON, error) {
	all, err := n.Neighbours()
	if err != nil {
		return NeighJSON{}, err
	}
	for _, e := range all {
		if e.Dev == dev && e.Dst == ip.String() {
			return e, nil
		}
	}
	return NeighJSON{}, ErrNoEntry
}

// HTTPGet fetches url from inside the namespace (its loopback is its own)
// and returns the status code and body.
func (n NS) HTTPGet(url string) (int, string, error) {
	var conn net.Conn
	u, err := neturl.Parse(url)
	if err != nil {
		return 0, "", err
	}
	host := u.Host
	err = n.Do(func() error {
		var err error
		conn, err = net.DialTimeout("tcp", host, Patience(5*time.Second))
		return err
	})
	if err != nil {
		return 0, "", fmt.Errorf("connect to %s in %s: %w", host, n.Name, err)
	}
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }, DisableKeepAlives: true}
	// Stretched in a guest under emulation (Patience): a loaded one took
	// longer than 10 s to answer a scrape.
	resp, err := (&http.Client{Transport: tr, Timeout: Patience(10 * time.Second)}).Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Attach returns a Lab for namespaces that already exist (made by an
// earlier Build); Close deletes them.
func Attach(client, node, backend string) *Lab {
	return &Lab{Client: NS{client}, Node: NS{node}, Backend: NS{backend}, namespaces: []string{client, node, backend}}
}

// Do runs fn on a thread inside the namespace. Sockets fn opens stay in
// the namespace; BPF_PROG_TEST_RUN resolves interfaces in it.
func (n NS) Do(fn func() error) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(h); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("return from %s: %w (thread left locked)", n.Name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// RaiseGCThresh raises the host-wide neighbour GC thresholds (they live in
// the initial namespace and apply to all) to at least n, and restores them
// when the test ends. Tests that change them hold a file lock meanwhile,
// so they never run beside each other, even across packages.
func RaiseGCThresh(tb testing.TB, n int) {
	tb.Helper()
	HoldGCThresh(tb)(n)
}

// HoldGCThresh takes the lock on the host-wide GC thresholds until the
// test ends, when it restores them, and returns how to raise them
// meanwhile: a test that must start something with the thresholds as
// they are, then raise them.
func HoldGCThresh(tb testing.TB) (raise func(n int)) {
	tb.Helper()
	lock, err := os.OpenFile("/run/neighwatch-gcthresh.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		tb.Fatal(err)
	}
	saved := map[string][]byte{}
	keys := []string{"gc_thresh3", "gc_thresh2", "gc_thresh1"} // raise the top first
	path := func(fam, k string) string { return "/proc/sys/net/" + fam + "/neigh/default/" + k }
	restore := func() {
		// The test's namespaces are deleted by now, but the kernel frees
		// their entries later (netns teardown is asynchronous): with the
		// thresholds back down meanwhile, forced garbage collection
		// would evict other tests' STALE entries. Wait, within reason,
		// for the tables to drain below the thresholds they go back to.
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			v4, v6 := tableEntries("arp_cache"), tableEntries("ndisc_cache")
			if v4 < atoiBytes(saved[path("ipv4", "gc_thresh2")]) && v6 < atoiBytes(saved[path("ipv6", "gc_thresh2")]) {
				break
			}
		}
		for _, fam := range []string{"ipv4", "ipv6"} {
			for i := len(keys) - 1; i >= 0; i-- { // lower the bottom first
				if v, ok := saved[path(fam, keys[i])]; ok {
					_ = os.WriteFile(path(fam, keys[i]), v, 0o644)
				}
			}
		}
		unix.Flock(int(lock.Fd()), unix.LOCK_UN)
		lock.Close()
	}
	tb.Cleanup(restore)
	for _, fam := range []string{"ipv4", "ipv6"} {
		for _, k := range keys {
			p := path(fam, k)
			v, err := os.ReadFile(p)
			if err != nil {
				tb.Fatal(err)
			}
			saved[p] = v
		}
	}
	return func(n int) {
		tb.Helper()
		for _, fam := range []string{"ipv4", "ipv6"} {
			for _, k := range keys {
				p := path(fam, k)
				if err := os.WriteFile(p, []byte(fmt.Sprint(n)), 0o644); err != nil {
					tb.Fatalf("raise %s: %v", p, err)
				}
			}
		}
	}
}

// tableEntries returns how many entries a neighbour table holds in all
// namespaces (/proc/net/stat/arp_cache or ndisc_cache, first column, hex);
// 0 if unreadable.
func tableEntries(name string) int {
	b, err := os.ReadFile("/proc/net/stat/" + name)
	if err != nil {
		return 0
	}
	lines := strings.SplitN(string(b), "\n", 3)
	if len(lines) < 2 {
		return 0
	}
	f := strings.Fields(lines[1])
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 16, 64)
	return int(n)
}

func atoiBytes(b []byte) int {
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// MaxInWindow returns the most events of sorted times that fall within
// any window of length d: what a rate limit bounds.
func MaxInWindow(times []time.Time, d time.Duration) int {
	worst := 0
	j := 0
	for i := range times {
		for times[i].Sub(times[j]) >= d {
			j++
		}
		worst = max(worst, i-j+1)
	}
	return worst
}

// QuickNeighTimers shortens an interface's IPv4 neighbour timers so a
// STALE entry is re-validated within about 2 s of use (DELAY 1 s, probes
// every 300 ms) instead of 8 s.
func (n NS) QuickNeighTimers(dev string) error {
	for k, v := range map[string]string{"delay_first_probe_time": "1", "retrans_time_ms": "300"} {
		if err := n.Sysctl("net.ipv4.neigh."+dev+"."+k, v); err != nil {
			return err
		}
	}
	return nil
}

// WaitFor polls cond every 20 ms until it holds and fails tb if it does
// not within d. d bounds the wait for something that must happen; it is
// not a measurement, so make it generous.
func WaitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	d = Patience(d)
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
