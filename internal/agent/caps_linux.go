package agent

import "golang.org/x/sys/unix"

// caps is a process's effective capability set.
type caps [2]uint32

// effectiveCaps returns this process's effective capabilities; none if the
// kernel will not say.
func effectiveCaps() caps {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return caps{}
	}
	return caps{data[0].Effective, data[1].Effective}
}

func (c caps) has(capability int) bool {
	return c[capability/32]&(1<<(capability%32)) != 0
}

// bpf reports whether the process may load and attach tracing and
// networking eBPF programs.
func (c caps) bpf() bool {
	return c.has(unix.CAP_SYS_ADMIN) || (c.has(unix.CAP_BPF) && c.has(unix.CAP_PERFMON))
}
