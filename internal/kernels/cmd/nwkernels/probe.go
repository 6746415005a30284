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
	"github.com/neighwatch/neighwatch/internal/kernels"
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
// its own.
func probe(args []string) error {
	fs := flag.NewFlagSet("nwkernels probe", flag.ContinueOnError)
	out := fs.String("out", "", "write the capabilities there (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return err
	}
	c := kernels.Caps{Release: unameRelease()}
	add := func(name, value, detail string) {
		c.Capabilities = append(c.Capabilities, kernels.Capability{Name: name, Value: value, Detail: detail})
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
	err := inNS(ns, func() error {
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
		fe := "yes"
		if fb := tr.Fallback(); fb != nil {
			fe = "no"
			add("fentry", fe, oneLine(fb))
		} else {
			add("fentry", fe, "")
		}
		for _, p := range tr.Programs() {
			if !p.Loaded && p.Refusal != bpf.RefusedDisabled {
				fmt.Fprintf(os.Stderr, "refused: %s (%s): %s\n", p.Hook, p.Refusal, p.Error)
				c.Refused = append(c.Refused, fmt.Sprintf("`%s` (%s): %s", p.Hook, p.Refusal, shortErr(p.Error)))
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
	})
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.Write(append(b, '\n'))
		return err
	}
	return os.WriteFile(*out, b, 0o644)
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
