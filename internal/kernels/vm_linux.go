package kernels

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A Step is one command the guest runs, from Dir, with its output in
// RESULTS/Name.out and its exit status in RESULTS/Name.rc.
type Step struct {
	Name string
	Dir  string
	Env  []string
	Argv []string
}

// Boot is one run of a kernel under qemu. The guest sees the host's root
// read-only at /, with tmpfs on /tmp, /run, /var/tmp and /root, the
// kernel's own modules at /lib/modules/RELEASE, and Results (a host
// directory outside /tmp) writable at the same path. Host paths therefore
// mean the same in the guest: test binaries built on the host run there
// as they are.
type Boot struct {
	Image   Image
	Results string
	Steps   []Step
	CPUs    int
	Memory  int // MiB
	Timeout time.Duration
	// Qemu is the emulator (default qemu-system-x86_64).
	Qemu string
}

// Run boots the kernel, runs the steps and powers off. It fails when the
// kernel does not boot, the guest does not finish in time, or a step did
// not leave its exit status; the steps' own results are in Results.
func (b Boot) Run(ctx context.Context) error {
	if strings.HasPrefix(b.Results, "/tmp/") {
		return fmt.Errorf("results directory %s: the guest mounts a tmpfs on /tmp, choose one outside it", b.Results)
	}
	if err := os.MkdirAll(b.Results, 0o755); err != nil {
		return err
	}
	script := filepath.Join(b.Results, "guest.sh")
	if err := os.WriteFile(script, []byte(b.script()), 0o755); err != nil {
		return err
	}
	console := filepath.Join(b.Results, "console.log")
	qemu := b.Qemu
	if qemu == "" {
		qemu = "qemu-system-x86_64"
	}
	cpus, mem := b.CPUs, b.Memory
	if cpus == 0 {
		cpus = 2
	}
	if mem == 0 {
		mem = 2048
	}
	// TCG: /dev/kvm on these machines cannot run a standard guest.
	args := []string{
		"-accel", "tcg,thread=multi", "-cpu", "max", "-smp", strconv.Itoa(cpus), "-m", strconv.Itoa(mem),
		"-display", "none", "-monitor", "none", "-serial", "file:" + console, "-no-reboot", "-nic", "none",
		"-kernel", b.Image.Vmlinuz, "-initrd", b.Image.Initramfs,
		"-append", "console=ttyS0 panic=-1 mitigations=off loglevel=5 nw.init=" + script,
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + b.Results + ",mount_tag=results,security_model=none,multidevs=remap",
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

// script is the guest's init after the switch to the shared root.
func (b Boot) script() string {
	var s strings.Builder
	r := b.Results
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
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 results %[3]q
# The host has no /lib/modules/%[1]s and its root is read-only: the
# kernel's module loader calls a modprobe that looks where the package
# was unpacked.
printf '#!/bin/sh\nexec /sbin/modprobe -d %%s "$@"\n' %[2]q > %[3]q/modprobe
chmod +x %[3]q/modprobe
echo %[3]q/modprobe > /proc/sys/kernel/modprobe
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
`, b.Image.Release, filepath.Dir(filepath.Dir(filepath.Dir(b.Image.Modules))), r, strings.ReplaceAll(b.Image.Kernel.Name, ".", "-"))
	for _, st := range b.Steps {
		fmt.Fprintf(&s, "echo 'nwkernels: step %s'\n", st.Name)
		fmt.Fprintf(&s, "(cd %q && env", st.Dir)
		for _, e := range st.Env {
			fmt.Fprintf(&s, " %q", e)
		}
		for _, a := range st.Argv {
			fmt.Fprintf(&s, " %q", a)
		}
		fmt.Fprintf(&s, ") > %q 2>&1 </dev/null\n", filepath.Join(r, st.Name+".out"))
		fmt.Fprintf(&s, "echo $? > %q\n", filepath.Join(r, st.Name+".rc"))
	}
	fmt.Fprintf(&s, "dmesg > %q 2>&1\nsync\necho o > /proc/sysrq-trigger\nsleep 60\n", filepath.Join(r, "dmesg.txt"))
	return s.String()
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return lastLines(string(b), n)
}
