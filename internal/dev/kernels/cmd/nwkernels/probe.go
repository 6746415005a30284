//go:build linux

package main

import (
	"encoding/json"
	"flag"

	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/cilium/ebpf/rlimit"
	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/dev/kernels"
	"github.com/neighwatch/neighwatch/internal/dev/manifests"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func unameRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "?"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// probe reports what the running kernel gives neighwatch: the tracer as
// the agent loads it (program by program), how TC programs attach, and
// managed entries, asked of the kernel itself. It works in a namespace of
// its own. With --as daemonset or systemd it asks as the agent runs in
// that deployment, with only its capabilities, no_new_privs and memlock
// limit (read from deploy/, so run it from the repository's root): it
// makes the namespace, then runs itself there under those privileges.
func probe(args []string) error {
	fs := flag.NewFlagSet("nwkernels probe", flag.ContinueOnError)
	out := fs.String("out", "", "write the capabilities there (default: standard output)")
	as := fs.String("as", "root", "probe as root, or as the agent runs under the daemonset's or the systemd unit's privileges")
	here := fs.Bool("here", false, "probe in this namespace, with this process's privileges (what --as runs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *here {
		return probeHere(*out)
	}
	ns := fmt.Sprintf("nwprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	for _, args := range [][]string{
		{"link", "add", "pr0", "type", "veth", "peer", "name", "pr1"},
		{"link", "set", "pr0", "up"}, {"link", "set", "pr1", "up"},
		{"addr", "add", "192.0.2.1/24", "dev", "pr0"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	argv := []string{self, "probe", "--here", "--out", *out}
	switch *as {
	case "root":
	case "daemonset", "systemd":
		p, err := privileges(*as)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "probing as %s\n", p)
		argv = p.Wrap(argv...)
	default:
		return fmt.Errorf("--as %q: want root, daemonset or systemd", *as)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// privileges reads a deployment's privileges from the repository at the
// working directory.
func privileges(as string) (manifests.Privileges, error) {
	if as == "systemd" {
		return manifests.SystemdPrivileges(".")
	}
	return manifests.DaemonSetPrivileges(".")
}

// probeHere is the probe itself, in the current namespace, with the
// process's own privileges: it lifts RLIMIT_MEMLOCK as the agent does,
// and says so when it cannot.
func probeHere(out string) error {
	c := kernels.Caps{Release: unameRelease()}
	add := func(name, value, detail string) {
		c.Capabilities = append(c.Capabilities, kernels.Capability{Name: name, Value: value, Detail: detail})
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		// What follows shows what it costs (the tracer refused); the
		// matrix holds it against the probe as root.
		fmt.Fprintf(os.Stderr, "RLIMIT_MEMLOCK not lifted: %v\n", err)
	}
	err := func() error {
		start := time.Now()
		tr, err := bpf.LoadTracer(bpf.TracerOptions{Mode: bpf.TracerAuto})
		fmt.Fprintf(os.Stderr, "tracer loaded in %v\n", time.Since(start))
		if err != nil {
			add("tracer", "no", oneLine(err))
			return nil
		}
		defer tr.Close()
		for _, f := range tr.Features() {
			v := f.Via
			if !f.Working {
				v = "no"
			}
			add(string(f.Feature), v, f.Why)
		}
		seed := "kernel"
		if !tr.SeedsInKernel() {
			seed = "entry by entry"
		}
		add("seed", seed, "")
		// Asked of the kernel with a program of the probe's own, then
		// held against what the tracer made of it.
		fe, why := bpf.FentryAllowed()
		add("fentry", yesNo(fe), why)
		if fb := tr.Fallback(); (fb == nil) != fe {
			return fmt.Errorf("the kernel allows fentry: %v (%s); the tracer's fallback from fentry: %v", fe, why, fb)
		}
		for _, p := range tr.Programs() {
			if !p.Loaded && p.Refusal != bpf.RefusedDisabled {
				fmt.Fprintf(os.Stderr, "refused: %s (%s): %s\n", p.Hook, p.Refusal, p.Error)
				hook := p.Hook
				if !strings.Contains(hook, "/") { // syscall, tc: no target to tell the programs apart
					hook += " " + p.Program
				}
				c.Refused = append(c.Refused, fmt.Sprintf("`%s` (%s): %s", hook, p.Refusal, shortErr(p.Error)))
			}
		}

		dp, err := bpf.LoadDatapath()
		if err != nil {
			add("tc-attach", "no", oneLine(err))
			return nil
		}
		defer dp.Close()
		ifi, err := net.InterfaceByName("pr0")
		if err != nil {
			return err
		}
		if err := dp.Attach(ifi.Index, bpf.ModeLegacy); err != nil {
			add("tc-attach", "no", oneLine(err))
		} else {
			m := string(dp.Method(ifi.Index))
			add("tc-attach", m, "")
			// The source-MAC program attaches the same way.
			for i := range c.Capabilities {
				if c.Capabilities[i].Name == string(bpf.FeatureSourceMAC) && c.Capabilities[i].Value != "no" {
					c.Capabilities[i].Value = m
				}
			}
		}
		add("skip-neigh", yesNo(dp.SkipNeigh()), "")

		managed, detail := probeManaged(ifi.Index)
		add("managed", yesNo(managed), detail)
		if ok, why := remediate.ManagedSupported(); ok != managed {
			return fmt.Errorf("remediate.ManagedSupported says %v (%s), the kernel says %v", ok, why, managed)
		}
		return nil
	}()
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

// probeManaged adds a managed entry (NTF_EXT_MANAGED) and reads it back:
// kernels before 5.16 ignore the flag without an error.
func probeManaged(ifindex int) (bool, string) {
	n := &netlink.Neigh{LinkIndex: ifindex, Family: unix.AF_INET, IP: net.ParseIP("192.0.2.7"), FlagsExt: netlink.NTF_EXT_MANAGED}
	if err := netlink.NeighSet(n); err != nil {
		return false, "add a managed entry: " + err.Error()
	}
	list, err := netlink.NeighList(ifindex, unix.AF_INET)
	if err != nil {
		return false, err.Error()
	}
	for _, e := range list {
		if e.IP.Equal(n.IP) {
			if e.FlagsExt&netlink.NTF_EXT_MANAGED != 0 {
				return true, ""
			}
			return false, "the kernel kept the entry but not NTF_EXT_MANAGED (before 5.16)"
		}
	}
	return false, "the entry is gone"
}

// shortErr keeps the kernel's words of a load error: what follows the
// last "load program: " or "attach ...: ".
func shortErr(s string) string {
	for _, sep := range []string{"load program: ", ": attach "} {
		if i := strings.LastIndex(s, sep); i >= 0 {
			s = s[i+len(sep):]
		}
	}
	return omitted.ReplaceAllString(s, "")
}

var omitted = regexp.MustCompile(`\s*\(\d+ line\(s\) omitted\)$`)

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func oneLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
