package manifests

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ContainerMemlock is the RLIMIT_MEMLOCK a container gets from containerd
// under systemd before 253 (Debian 11, Amazon Linux 2): 64 KiB, soft and
// hard. Kernels before 5.11 charge BPF maps to it. systemd before 253
// gives its services the same by default.
const ContainerMemlock = 64 << 10

// SystemdUnit is the systemd unit's path inside the repository.
const SystemdUnit = "deploy/systemd/neighwatch.service"

// Privileges are what a deployment gives the agent: its capabilities, no
// new privileges, and the memlock limit the runtime sets. The kernel
// matrix runs the agent under them, read from the manifests themselves:
// one source, not a copy.
type Privileges struct {
	Name string
	// Caps are capability names as Kubernetes writes them: "NET_ADMIN".
	Caps         []string
	NoNewPrivs   bool
	MemlockBytes uint64
}

// DaemonSetPrivileges reads them from the DaemonSet's container.
func DaemonSetPrivileges(root string) (Privileges, error) {
	ds, err := DaemonSet(root)
	if err != nil {
		return Privileges{}, err
	}
	c := ds.Spec.Template.Spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		return Privileges{}, fmt.Errorf("the DaemonSet's container %s has no securityContext capabilities", c.Name)
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		return Privileges{}, fmt.Errorf("the DaemonSet's container drops %v, not ALL: its capabilities would be the runtime's defaults", sc.Capabilities.Drop)
	}
	p := Privileges{Name: "daemonset", MemlockBytes: ContainerMemlock}
	for _, a := range sc.Capabilities.Add {
		p.Caps = append(p.Caps, strings.TrimPrefix(string(a), "CAP_"))
	}
	p.NoNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	return p, nil
}

// SystemdPrivileges reads them from the systemd unit: its bounding set
// (AmbientCapabilities must not exceed it) and NoNewPrivileges; memlock is
// systemd's default before 253, unless the unit sets LimitMEMLOCK.
func SystemdPrivileges(root string) (Privileges, error) {
	b, err := os.ReadFile(filepath.Join(root, SystemdUnit))
	if err != nil {
		return Privileges{}, err
	}
	p := Privileges{Name: "systemd", MemlockBytes: ContainerMemlock}
	var ambient []string
	bounded := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "CapabilityBoundingSet":
			bounded = true
			for _, c := range strings.Fields(v) {
				p.Caps = append(p.Caps, strings.TrimPrefix(c, "CAP_"))
			}
		case "AmbientCapabilities":
			for _, c := range strings.Fields(v) {
				ambient = append(ambient, strings.TrimPrefix(c, "CAP_"))
			}
		case "NoNewPrivileges":
			p.NoNewPrivs = v == "yes" || v == "true"
		case "LimitMEMLOCK":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return Privileges{}, fmt.Errorf("%s: LimitMEMLOCK=%s: only a number of bytes is understood here", SystemdUnit, v)
			}
			p.MemlockBytes = n
		}
	}
	if !bounded {
		return Privileges{}, fmt.Errorf("%s sets no CapabilityBoundingSet: the agent would keep every capability of root", SystemdUnit)
	}
	for _, a := range ambient {
		if !slices.Contains(p.Caps, a) {
			return Privileges{}, fmt.Errorf("%s: ambient capability %s is not in the bounding set", SystemdUnit, a)
		}
	}
	return p, sc.Err()
}

// Wrap returns argv run under the privileges, as root would start it:
// prlimit sets the memlock limit, setpriv keeps only the capabilities
// (the bounding set: what uid 0 gets on exec) and sets no_new_privs.
// Both come with util-linux.
func (p Privileges) Wrap(argv ...string) []string {
	caps := "-all"
	for _, c := range p.Caps {
		caps += ",+" + strings.ToLower(c)
	}
	out := []string{"prlimit", fmt.Sprintf("--memlock=%d:%d", p.MemlockBytes, p.MemlockBytes), "--",
		"setpriv", "--bounding-set=" + caps}
	if p.NoNewPrivs {
		out = append(out, "--no-new-privs")
	}
	return append(append(out, "--"), argv...)
}

// String names the privileges for a log or a table: "daemonset
// (NET_ADMIN NET_RAW ..., no_new_privs, memlock 64 KiB)".
func (p Privileges) String() string {
	s := p.Name + " (" + strings.Join(p.Caps, " ")
	if p.NoNewPrivs {
		s += ", no_new_privs"
	}
	return s + fmt.Sprintf(", memlock %d KiB)", p.MemlockBytes/1024)
}
