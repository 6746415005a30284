package cluster

import (
	"strings"
	"testing"
)

// TestHostStateDiff: each kind of thing a node could leave behind shows
// in the diff, and alike states show none.
func TestHostStateDiff(t *testing.T) {
	base := func() HostState {
		return HostState{Mounts: []string{"/"}, Cgroups: []string{"/sys/fs/cgroup/cpu/a"}, Links: []string{"lo"},
			Neighbours: []string{"1 10.0.0.1"}, Rules: []string{"iptables-save: *filter"}, Processes: map[string]int{"containerd": 0},
			Files: map[string]bool{"/var/lib/kubelet": false}, Entries: []string{"/etc/hosts"}, Sysctls: map[string]string{"kernel/panic": "0"}}
	}
	if d := base().Diff(base()); d != "" {
		t.Fatalf("alike states differ: %s", d)
	}
	for _, tc := range []struct {
		want   string
		change func(*HostState)
	}{
		{"mount added: /var/lib/kubelet", func(s *HostState) { s.Mounts = append(s.Mounts, "/var/lib/kubelet") }},
		{"cgroup added: /sys/fs/cgroup/cpu/nwk8s-1", func(s *HostState) { s.Cgroups = append(s.Cgroups, "/sys/fs/cgroup/cpu/nwk8s-1") }},
		{"link added: nwk8s1", func(s *HostState) { s.Links = append(s.Links, "nwk8s1") }},
		{"neighbour added: 2 10.254.0.2", func(s *HostState) { s.Neighbours = append(s.Neighbours, "2 10.254.0.2") }},
		{"rule added: iptables-save: -A KUBE-FIREWALL", func(s *HostState) { s.Rules = append(s.Rules, "iptables-save: -A KUBE-FIREWALL") }},
		{"process containerd: 1 running, 0 before", func(s *HostState) { s.Processes["containerd"] = 1 }},
		{"file /var/lib/kubelet: exists true, before false", func(s *HostState) { s.Files["/var/lib/kubelet"] = true }},
		{"path added: /etc/cni", func(s *HostState) { s.Entries = append(s.Entries, "/etc/cni") }},
		{"sysctl kernel/panic = 10, before 0", func(s *HostState) { s.Sysctls["kernel/panic"] = "10" }},
		{"mount gone: /", func(s *HostState) { s.Mounts = nil }},
	} {
		after := base()
		tc.change(&after)
		if d := base().Diff(after); !strings.Contains(d, tc.want) {
			t.Errorf("diff %q, want it to say %q", d, tc.want)
		}
	}
}
