package kernels

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A Step is one command the guest runs, from Dir, with its output in
// RESULTS/Name.out, its exit status in RESULTS/Name.rc and its start and
// end (seconds since the epoch, by the guest's clock) in
// RESULTS/Name.time. Dir, Argv and Env name host paths: Boot maps those
// under a share to the share's path in the guest.
type Step struct {
	Name string
	Dir  string
	Env  []string
	Argv []string
}

// GuestRoot is where the guest mounts the shares: GuestRoot/TAG for each.
// It is a tmpfs over the host's /mnt, so no path of the host's root is
// hidden that a share does not replace.
const GuestRoot = "/mnt/nw"

// A Share is a host directory the guest sees at GuestRoot/Tag, read-only
// (the results are the one writable share).
type Share struct {
	Tag  string // virtfs mount tag: letters only
	Host string // absolute host path
}

// A machine is how qemu emulates one architecture.
type machine struct {
	qemu    string
	args    []string // the machine and its CPU
	console string   // the serial console's device in the guest
}

// machines are the emulated machines, by Debian architecture. arm64 is
// qemu's virt board with a Neoverse N1, the core of AWS Graviton2 (and
// of Ampere Altra): ARMv8.2 with the LSE atomics the BPF JIT uses for
// atomic operations, and none of the later extensions (pointer
// authentication, SVE) that TCG emulates slowly.
var machines = map[string]machine{
	"amd64": {qemu: "qemu-system-x86_64", args: []string{"-cpu", "max"}, console: "ttyS0"},
	"arm64": {qemu: "qemu-system-aarch64", args: []string{"-machine", "virt", "-cpu", "neoverse-n1"}, console: "ttyAMA0"},
}

// hiddenInGuest are the directories of the host's root that the guest
// covers with a tmpfs: nothing under them is seen there but through a
// share.
var hiddenInGuest = []string{"/tmp", "/run", "/var/tmp", "/root", "/mnt"}

// Boot is one run of a kernel under qemu. The guest sees the host's root
// read-only at /, with tmpfs on the directories of hiddenInGuest, and
// each of its shares through a virtfs mount of its own under GuestRoot:
// the results (writable), the unpacked kernel (its modules), and Shares
// (the checkout, the test binaries). Where the checkout lives on the host
// does not matter: under /tmp or /root as anywhere else.
type Boot struct {
	Image   Image
	Results string
	Shares  []Share
	Steps   []Step
	CPUs    int
	Memory  int // MiB
	Timeout time.Duration
	// Qemu is the emulator (default qemu-system-x86_64).
	Qemu string
}

// shares lists every share of the boot: results first.
func (b Boot) shares() []Share {
	out := []Share{{Tag: "results", Host: b.Results}}
	if b.Image.Root != "" {
		out = append(out, Share{Tag: "kernel", Host: b.Image.Root})
	}
	return append(out, b.Shares...)
}

// Guest returns where a host path is in the guest: under the share that
// holds it (the deepest one), or the same path on the shared root. It
// fails for a path the guest cannot see: under a directory the guest
// covers with a tmpfs and in no share.
func (b Boot) Guest(host string) (string, error) {
	best, rest := Share{}, ""
	for _, sh := range b.shares() {
		if r, ok := under(host, sh.Host); ok && len(sh.Host) > len(best.Host) {
			best, rest = sh, r
		}
	}
	if best.Tag != "" {
		return path.Join(GuestRoot, best.Tag, rest), nil
	}
	if b.Image.Userland != "" {
		return "", fmt.Errorf("%s is not in the guest: its root is the %s userland, and no share holds it", host, b.Image.Kernel.Architecture())
	}
	for _, d := range hiddenInGuest {
		if _, ok := under(host, d); ok {
			return "", fmt.Errorf("%s is hidden in the guest (a tmpfs covers %s) and in no share", host, d)
		}
	}
	return host, nil
}

// under reports whether p is dir or below it, and the rest of p.
func under(p, dir string) (string, bool) {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	if p == dir {
		return "", true
	}
	if strings.HasPrefix(p, dir+"/") {
		return p[len(dir)+1:], true
	}
	return "", false
}

// Run boots the kernel, runs the steps and powers off. It fails when the
// kernel does not boot, the guest does not finish in time, or a step did
// not leave its exit status; the steps' own results are in Results.
func (b Boot) Run(ctx context.Context) error {
	script, err := b.script()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(b.Results, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.Results, "guest.sh"), []byte(script), 0o755); err != nil {
		return err
	}
	console := filepath.Join(b.Results, "console.log")
	machine := machines[b.Image.Kernel.Architecture()]
	if machine.qemu == "" {
		return fmt.Errorf("kernel %s: no emulator for %s", b.Image.Release, b.Image.Kernel.Architecture())
	}
	qemu := b.Qemu
	if qemu == "" {
		qemu = machine.qemu
	}
	root := "/"
	if b.Image.Userland != "" {
		root = b.Image.Userland
	}
	cpus, mem := b.CPUs, b.Memory
	if cpus == 0 {
		cpus = 2
	}
	if mem == 0 {
		mem = 2048
	}
	var tags []string
	for _, sh := range b.shares() {
		tags = append(tags, sh.Tag)
	}
	// TCG: /dev/kvm on these machines cannot run a standard guest.
	args := append(append([]string{"-accel", "tcg,thread=multi"}, machine.args...),
		"-smp", strconv.Itoa(cpus), "-m", strconv.Itoa(mem),
		"-display", "none", "-monitor", "none", "-serial", "file:"+console, "-no-reboot", "-nic", "none",
		"-kernel", b.Image.Vmlinuz, "-initrd", b.Image.Initramfs,
		"-append", "console="+machine.console+" panic=-1 mitigations=off loglevel=5 nw.shares="+strings.Join(tags, ","),
		"-virtfs", "local,path="+root+",mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
	)
	for _, sh := range b.shares() {
		ro := ",readonly=on"
		if sh.Tag == "results" {
			ro = ""
		}
		args = append(args, "-virtfs", "local,path="+sh.Host+",mount_tag="+sh.Tag+",security_model=none"+ro+",multidevs=remap")
	}
	timeout := b.Timeout
	if timeout == 0 {
		timeout = 15 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hung := make(chan struct{})
	go watchHung(ctx, console, hung, cancel)
	cmd := exec.CommandContext(ctx, qemu, args...)
	out, err := cmd.CombinedOutput()
	select {
	case <-hung:
		return fmt.Errorf("kernel %s hung (soft lockups on its console), stopped: %s", b.Image.Release, console)
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("kernel %s did not finish within %v (console: %s)", b.Image.Release, timeout, console)
	}
	if err != nil {
		return fmt.Errorf("qemu: %w: %s", err, lastLines(string(out), 5))
	}
	if _, err := os.Stat(filepath.Join(b.Results, "booted")); err != nil {
		return fmt.Errorf("kernel %s did not boot to the guest script; console:\n%s", b.Image.Release, tail(console, 20))
	}
	for _, s := range b.Steps {
		if _, err := os.Stat(filepath.Join(b.Results, s.Name+".rc")); err != nil {
			return fmt.Errorf("kernel %s: step %s left no exit status; console:\n%s", b.Image.Release, s.Name, tail(console, 20))
		}
	}
	return nil
}

// watchHung reads the console every few seconds and stops the guest
// (closes hung, then cancels) once its kernel is hung: it would never
// finish, and the timeout is many minutes away.
func watchHung(ctx context.Context, console string, hung chan<- struct{}, cancel func()) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if b, err := os.ReadFile(console); err == nil && Hung(b) {
			close(hung)
			cancel()
			return
		}
	}
}

// script is the guest's init after the switch to the shared root, which
// the initramfs made with the shares mounted under GuestRoot.
func (b Boot) script() (string, error) {
	var s strings.Builder
	r := path.Join(GuestRoot, "results")
	modBase := ""
	if b.Image.Modules != "" {
		// modprobe -d takes the directory holding lib/modules/RELEASE.
		g, err := b.Guest(filepath.Dir(filepath.Dir(filepath.Dir(b.Image.Modules))))
		if err != nil {
			return "", fmt.Errorf("the kernel's modules: %w", err)
		}
		modBase = g
	}
	fmt.Fprintf(&s, `#!/bin/bash
# Written by nwkernels: the guest's init on the host's read-only root.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
for d in /tmp /run /var/tmp /root; do mount -t tmpfs tmpfs "$d"; done
# The host has no /lib/modules/%[1]s and its root is read-only: the
# kernel's module loader calls a modprobe that looks where the package
# was unpacked.
printf '#!/bin/sh\nexec /sbin/modprobe -d %%s "$@"\n' %[2]q > /run/nw-modprobe
chmod +x /run/nw-modprobe
echo /run/nw-modprobe > /proc/sys/kernel/modprobe
mount -t bpf bpf /sys/fs/bpf
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
ip link set lo up
# Keep the tc ingress and egress static keys on for the whole run. The
# tests add and remove hooks all the time, and each first hook on or last
# hook off patches the kernel's text, which multi-threaded TCG has raced
# (a stray int3 in __netif_receive_skb_core). The tests run in their own
# namespaces and never see this device.
{ ip link add nwkeys type dummy && tc qdisc add dev nwkeys clsact; } >/dev/null 2>&1 ||
	echo 'nwkernels: could not hold the tc static keys on (dummy, clsact)'
hostname nwkernel-%[4]s
uname -r > %[3]q/booted
`, b.Image.Release, modBase, r, strings.ReplaceAll(b.Image.Kernel.Name, ".", "-"))
	for _, st := range b.Steps {
		dir, err := b.Guest(st.Dir)
		if err != nil {
			return "", fmt.Errorf("step %s: %w", st.Name, err)
		}
		fmt.Fprintf(&s, "echo 'nwkernels: step %s'\n", st.Name)
		fmt.Fprintf(&s, "date +%%s.%%N > %q\n", path.Join(r, st.Name+".time"))
		fmt.Fprintf(&s, "(cd %q && env", dir)
		for _, e := range st.Env {
			k, v, _ := strings.Cut(e, "=")
			if strings.HasPrefix(v, "/") {
				g, err := b.Guest(v)
				if err != nil {
					return "", fmt.Errorf("step %s: %s: %w", st.Name, k, err)
				}
				v = g
			}
			fmt.Fprintf(&s, " %q", k+"="+v)
		}
		for _, a := range st.Argv {
			if strings.HasPrefix(a, "/") {
				g, err := b.Guest(a)
				if err != nil {
					return "", fmt.Errorf("step %s: %w", st.Name, err)
				}
				a = g
			}
			fmt.Fprintf(&s, " %q", a)
		}
		fmt.Fprintf(&s, ") > %q 2>&1 </dev/null\n", path.Join(r, st.Name+".out"))
		fmt.Fprintf(&s, "echo $? > %q\n", path.Join(r, st.Name+".rc"))
		fmt.Fprintf(&s, "date +%%s.%%N >> %q\n", path.Join(r, st.Name+".time"))
	}
	fmt.Fprintf(&s, "dmesg > %q 2>&1\nsync\necho o > /proc/sysrq-trigger\nsleep 60\n", path.Join(r, "dmesg.txt"))
	return s.String(), nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(b), n)
}
