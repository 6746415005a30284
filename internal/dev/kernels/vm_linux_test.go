package kernels

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQemu stands in for qemu-system-x86_64: it writes lines to the file
// given as -serial file:PATH, then waits for the run to stop it.
func fakeQemu(t *testing.T, lines string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "qemu")
	body := `#!/bin/sh
while [ $# -gt 0 ]; do
	case "$1" in -serial) console="${2#file:}"; shift;; esac
	shift
done
printf '%s' "` + lines + `" >> "$console"
exec sleep 600
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// TestBootStopsHungGuest: a guest whose console shows it hung is stopped
// at the next look, long before the timeout, and the error says so; one
// soft lockup alone is waited out.
func TestBootStopsHungGuest(t *testing.T) {
	for _, tc := range []struct {
		name, console string
		hung          bool
	}{
		{"hung", strings.Repeat(lockupLine, 3), true},
		{"one lockup", lockupLine, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Under /tmp, where t.TempDir usually is: the guest sees its
			// results through a share wherever they are.
			results := t.TempDir()
			// A hung guest must be stopped by the watcher, not the
			// timeout; the other one ends by the timeout, after the
			// watcher's first looks (every 5 s).
			timeout := 10 * time.Minute
			if !tc.hung {
				timeout = 12 * time.Second
			}
			b := Boot{Image: Image{Release: "test"}, Results: results, Qemu: fakeQemu(t, tc.console), Timeout: timeout}
			err := b.Run(context.Background())
			if err == nil {
				t.Fatal("Run returned no error")
			}
			if got := strings.Contains(err.Error(), "hung"); got != tc.hung {
				t.Errorf("Run: %v; want hung: %v", err, tc.hung)
			}
		})
	}
}

// TestGuestPaths: every path a step names is seen in the guest through
// the share that holds it, wherever the checkout is; a path under a
// directory the guest covers with a tmpfs and in no share is refused,
// not left to fail inside the guest.
func TestGuestPaths(t *testing.T) {
	for _, co := range []string{"/tmp/nw-x", "/root/src/nw", "/var/tmp/nw", "/run/user/0/nw", "/home/u/nw", "/mnt/work/nw"} {
		b := Boot{Results: co + "/.kernels/results/6.1", Image: Image{Root: co + "/.kernels/cache/root/k"},
			Shares: []Share{{Tag: "src", Host: co}, {Tag: "bin", Host: co + "/.kernels/bin"}}}
		for host, want := range map[string]string{
			co + "/e2e":                          GuestRoot + "/src/e2e",
			co + "/.kernels/bin/e2e.test":        GuestRoot + "/bin/e2e.test",
			co + "/.kernels/results/6.1/x.json":  GuestRoot + "/results/x.json",
			co + "/.kernels/cache/root/k/lib/mo": GuestRoot + "/kernel/lib/mo",
			"/usr/sbin/ip":                       "/usr/sbin/ip",
		} {
			if got, err := b.Guest(host); err != nil || got != want {
				t.Errorf("checkout %s: %s is %q (%v) in the guest, want %q", co, host, got, err, want)
			}
		}
		if _, err := b.script(); err != nil {
			t.Errorf("checkout %s: %v", co, err)
		}
	}
	b := Boot{Results: "/srv/r"}
	for _, p := range []string{"/tmp/elsewhere/bin", "/root/x", "/mnt/y"} {
		if g, err := b.Guest(p); err == nil {
			t.Errorf("%s, in no share, is %q in the guest; want an error: a tmpfs hides it", p, g)
		}
	}
}

// TestBootFromAnyCheckout boots a real kernel of the matrix from a
// checkout under /tmp and one under /root (where the guest mounts a
// tmpfs): its step runs from the checkout, runs a program from its
// binaries and leaves its results in the checkout. Before the shares,
// Boot refused /tmp and a guest booted from /root found nothing.
func TestBootFromAnyCheckout(t *testing.T) {
	// CI runs it whatever else is asked: a skip there would hide it.
	if os.Getenv("CI") != "true" {
		if testing.Short() {
			t.Skip("boots a kernel under qemu: not under -short (make unit); CI=true runs it")
		}
		if os.Geteuid() != 0 {
			t.Skip("needs root to fetch a kernel with APT (CI=true fails instead)")
		}
	}
	for _, tool := range []string{"qemu-system-x86_64", "apt-get", "dpkg", "depmod"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing: scripts/install-deps.sh installs it", tool)
		}
	}
	img := fetchOne(t)
	for _, base := range []string{"/tmp", "/root"} {
		t.Run(base, func(t *testing.T) {
			co, err := os.MkdirTemp(base, "nw-checkout-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(co) })
			marker := "checkout at " + co
			for name, body := range map[string]string{"src/marker": marker, "bin/check": "#!/bin/sh\ncat marker\n"} {
				p := filepath.Join(co, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			results := filepath.Join(co, ".kernels", "results", "boot")
			b := Boot{Image: img, Results: results, CPUs: 1, Memory: 512, Timeout: 10 * time.Minute,
				Shares: []Share{{Tag: "src", Host: co}, {Tag: "bin", Host: filepath.Join(co, "bin")}},
				Steps:  []Step{{Name: "check", Dir: filepath.Join(co, "src"), Argv: []string{filepath.Join(co, "bin", "check")}}}}
			if err := b.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			out, _ := os.ReadFile(filepath.Join(results, "check.out"))
			rc, _ := os.ReadFile(filepath.Join(results, "check.rc"))
			if strings.TrimSpace(string(rc)) != "0" || strings.TrimSpace(string(out)) != marker {
				t.Errorf("the guest's step from %s: exit %q, output %q; want 0 and %q", co, rc, out, marker)
			}
		})
	}
}

// fetchOne returns the oldest kernel of the matrix, fetched into the
// cache the matrix itself uses (make test-kernels then finds it there).
func fetchOne(t *testing.T) Image {
	t.Helper()
	var archive string
	for _, p := range []string{"/etc/apt/sources.list", "/etc/apt/sources.list.d/debian.sources"} {
		if f, err := os.Open(p); err == nil {
			archive, err = ArchiveURI(f)
			f.Close()
			if err == nil {
				break
			}
		}
	}
	if archive == "" {
		t.Fatal("no Debian archive in the APT sources: the matrix fetches its kernels from it")
	}
	cache, err := filepath.Abs("../../../.kernels/cache")
	if err != nil {
		t.Fatal(err)
	}
	f := &Fetcher{Dir: cache, Archive: archive, Keyring: "/usr/share/keyrings/debian-archive-keyring.gpg"}
	imgs, err := f.Fetch(context.Background(), Debian[:1])
	if err != nil {
		t.Fatal(err)
	}
	return imgs[0]
}

// TestForeignGuestPaths: an arm64 guest's root is Debian's arm64
// userland, not the host's: a host path that no share holds is refused
// (the guest would find the userland's file of that name, or none),
// while the shares map as for any guest.
func TestForeignGuestPaths(t *testing.T) {
	b := Boot{Results: "/srv/nw/.kernels/results/arm64-6.1",
		Image:  Image{Kernel: Kernel{Name: "arm64-6.1", Arch: "arm64"}, Root: "/srv/nw/.kernels/cache/root/k", Userland: "/srv/nw/.kernels/cache/userland-arm64"},
		Shares: []Share{{Tag: "src", Host: "/srv/nw"}, {Tag: "bin", Host: "/srv/nw/.kernels/bin/arm64"}}}
	if got, err := b.Guest("/srv/nw/.kernels/bin/arm64/e2e.test"); err != nil || got != GuestRoot+"/bin/e2e.test" {
		t.Errorf("a test binary is %q (%v) in the guest, want %q", got, err, GuestRoot+"/bin/e2e.test")
	}
	for _, p := range []string{"/usr/sbin/ip", "/usr/local/go/bin/go"} {
		if g, err := b.Guest(p); err == nil {
			t.Errorf("the host's %s is %q in an arm64 guest; want an error: its root is the arm64 userland", p, g)
		}
	}
}

// TestMachineOfEachArchitecture: the emulator, board, CPU, console and
// root each architecture's guest boots with, read from the arguments
// qemu is given.
func TestMachineOfEachArchitecture(t *testing.T) {
	for _, tc := range []struct {
		kernel Kernel
		root   string
		want   []string
	}{
		{Kernel{Name: "6.1"}, "", []string{"-cpu max", "console=ttyS0", "local,path=/,mount_tag=hostroot"}},
		{Kernel{Name: "arm64-6.1", Arch: "arm64"}, "/srv/userland", []string{"-machine virt", "-cpu neoverse-n1", "console=ttyAMA0", "local,path=/srv/userland,mount_tag=hostroot"}},
	} {
		t.Run(tc.kernel.Name, func(t *testing.T) {
			results := t.TempDir()
			args := filepath.Join(results, "args")
			fake := filepath.Join(t.TempDir(), "qemu")
			if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$@\" > "+args+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			b := Boot{Image: Image{Kernel: tc.kernel, Release: "test", Userland: tc.root}, Results: results, Qemu: fake, Timeout: time.Minute}
			if err := b.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "did not boot") {
				t.Fatalf("Run: %v; want: did not boot (the fake qemu boots nothing)", err)
			}
			got, err := os.ReadFile(args)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(got), w) {
					t.Errorf("qemu was given %q; want %q in it", got, w)
				}
			}
		})
	}
	if _, ok := machines[Kernel{Arch: "riscv64"}.Architecture()]; ok {
		t.Fatal("riscv64 has a machine: this test names the ones it checks")
	}
}
