package cluster

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
)

// HostState is what a node could leave behind on the host that runs it:
// compared before Start and after Close, it must not have changed.
type HostState struct {
	// Mounts are the mount points of the caller's mount namespace.
	Mounts []string
	// Cgroups are the directories at the top of each cgroup hierarchy.
	Cgroups []string
	// Links are the interfaces of the caller's network namespace, and
	// Neighbours its neighbour entries ("dev ip").
	Links, Neighbours []string
	// Rules are iptables-save's and ip6tables-save's rules, comments
	// (which carry the time) left out.
	Rules []string
	// Processes are the running processes of the node's programs, by
	// name (comm), with their count.
	Processes map[string]int
	// Files are the paths the node's programs use by default, and
	// whether each exists.
	Files map[string]bool
	// Entries are the names in the directories where a program keeps
	// state (scanned), two levels down.
	Entries []string
	// Sysctls are the kernel tunables the kubelet sets.
	Sysctls map[string]string
}

// nodePrograms are the comm names of what a node runs.
var nodePrograms = []string{"nwk8s", "containerd", "containerd-shim", "containerd-shim-runc-v2", "runc", "pause", "neighwatch", "docker-registry"}

// defaultPaths are where the node's programs keep state when not told
// otherwise: none may appear on the host.
var defaultPaths = []string{"/run/containerd", "/var/lib/containerd", "/opt/containerd", "/var/lib/kubelet", "/var/log/pods",
	"/var/log/containers", "/etc/cni/net.d", "/var/lib/cni", "/etc/kubernetes", "/run/neighwatch", "/var/lib/etcd",
	"/usr/libexec/kubernetes"}

// libmountDir is where libmount (mount(8)) keeps its lock and the
// userspace mount options: made on a machine's first such mount.
const libmountDir = "/run/mount"

// scanned are the directories whose names, two levels down, must be the
// same after the node as before: where a program keeps state when a
// default was missed.
var scanned = []string{"/etc", "/opt", "/run", "/var/lib", "/var/log", "/var/run", "/usr/libexec", "/usr/local"}

// ReadHostState reads the host's state as the caller's namespaces see it.
func ReadHostState() (HostState, error) {
	var s HostState
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return s, err
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			s.Mounts = append(s.Mounts, fields[4])
		}
	}
	f.Close()
	slices.Sort(s.Mounts)
	hier, _ := filepath.Glob("/sys/fs/cgroup/*/*")
	for _, h := range hier {
		if fi, err := os.Stat(h); err == nil && fi.IsDir() {
			s.Cgroups = append(s.Cgroups, h)
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		return s, err
	}
	for _, l := range links {
		s.Links = append(s.Links, l.Attrs().Name)
	}
	slices.Sort(s.Links)
	neighs, err := netlink.NeighList(0, netlink.FAMILY_ALL)
	if err != nil {
		return s, err
	}
	for _, nb := range neighs {
		s.Neighbours = append(s.Neighbours, fmt.Sprintf("%d %s", nb.LinkIndex, nb.IP))
	}
	slices.Sort(s.Neighbours)
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(tool).Output()
		if err != nil {
			return s, fmt.Errorf("%s: %w", tool, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				s.Rules = append(s.Rules, tool+": "+l)
			}
		}
	}
	s.Processes = map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || zombie(pid) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(b)); slices.Contains(nodePrograms, c) {
			s.Processes[c]++
		}
	}
	s.Files = map[string]bool{}
	for _, p := range defaultPaths {
		_, err := os.Lstat(p)
		s.Files[p] = err == nil
	}
	for _, d := range scanned {
		for _, pattern := range []string{"*", "*/*"} {
			m, _ := filepath.Glob(filepath.Join(d, pattern))
			s.Entries = append(s.Entries, m...)
		}
	}
	slices.Sort(s.Entries)
	s.Sysctls = map[string]string{}
	for _, k := range kernelTunables {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return s, err
		}
		s.Sysctls[k] = strings.TrimSpace(string(b))
	}
	return s, nil
}

// Diff says what after has that s had not, or lost: one line each; empty
// when they are alike.
func (s HostState) Diff(after HostState) string {
	var b strings.Builder
	list := func(what string, was, is []string) {
		for _, x := range is {
			if !slices.Contains(was, x) {
				fmt.Fprintf(&b, "%s added: %s\n", what, x)
			}
		}
		for _, x := range was {
			if !slices.Contains(is, x) {
				fmt.Fprintf(&b, "%s gone: %s\n", what, x)
			}
		}
	}
	list("mount", s.Mounts, after.Mounts)
	list("cgroup", s.Cgroups, after.Cgroups)
	list("link", s.Links, after.Links)
	list("neighbour", s.Neighbours, after.Neighbours)
	list("rule", s.Rules, after.Rules)
	list("path", s.Entries, after.Entries)
	for _, k := range slices.Sorted(maps.Keys(after.Processes)) {
		if after.Processes[k] > s.Processes[k] {
			fmt.Fprintf(&b, "process %s: %d running, %d before\n", k, after.Processes[k], s.Processes[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after.Files)) {
		if after.Files[k] != s.Files[k] {
			fmt.Fprintf(&b, "file %s: exists %v, before %v\n", k, after.Files[k], s.Files[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after.Sysctls)) {
		if after.Sysctls[k] != s.Sysctls[k] {
			fmt.Fprintf(&b, "sysctl %s = %s, before %s\n", k, after.Sysctls[k], s.Sysctls[k])
		}
	}
	return b.String()
}
