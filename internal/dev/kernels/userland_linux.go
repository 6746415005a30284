package kernels

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// UserlandSuite is the Debian release whose packages make a foreign
// architecture's userland: one for every kernel of that architecture
// (its C library runs on all of them).
const UserlandSuite = "bookworm"

// userlandPackages are what a guest of another architecture runs besides
// the test binaries: the guest script's shells and tools (bash, dash for
// /bin/sh, coreutils, mount, dmesg, hostname, sysctl), the labs' ip and
// tc (iproute2), the deployed privileges' prlimit and setpriv
// (util-linux), modprobe for the kernel's modules (kmod), and the
// initramfs's static busybox. APT adds what they depend on.
var userlandPackages = []string{"bash", "dash", "coreutils", "util-linux", "mount", "procps", "iproute2", "kmod", "hostname", "busybox-static"}

// userlandDirs are the directories the guest mounts over or under: the
// packages do not make them all.
var userlandDirs = []string{"proc", "sys", "dev", "tmp", "run", "var/tmp", "root", "mnt", "etc"}

// userlandRoot is where the userland of arch is, named after what it
// holds: a changed list of packages makes a new one.
func (f *Fetcher) userlandRoot(arch string) string {
	sum := sha256.Sum256([]byte(UserlandSuite + " " + strings.Join(userlandPackages, " ")))
	return filepath.Join(f.Dir, "userland-"+arch+"-"+UserlandSuite+"-"+hex.EncodeToString(sum[:4]))
}

// userlandStale reports whether a cached image of a kernel that runs a
// userland of its own names one of an older list of packages.
func (f *Fetcher) userlandStale(img Image) bool {
	return !img.Kernel.Native() && img.Userland != f.userlandRoot(img.Kernel.Architecture())
}

// userland returns the root of Debian's packages of arch, unpacked here
// once and kept: the guests of that architecture mount it as their root.
func (f *Fetcher) userland(ctx context.Context, arch string) (string, error) {
	root := f.userlandRoot(arch)
	done := root + ".done"
	if _, err := os.Stat(done); err == nil && !f.Refresh {
		return root, nil
	}
	a := filepath.Join(f.Dir, "apt-"+arch+"-userland")
	if err := f.aptSources(a, []string{UserlandSuite}); err != nil {
		return "", err
	}
	// An empty package database: APT downloads everything the packages
	// need, as for a new machine.
	status := filepath.Join(a, "status")
	if err := os.WriteFile(status, nil, 0o644); err != nil {
		return "", err
	}
	args := append(aptOptions(a, arch), "-o", "Dir::State::status="+status)
	f.logf("the %s userland: fetching %s's %s and what they need", arch, UserlandSuite, strings.Join(userlandPackages, ", "))
	if _, err := f.run(ctx, "", "apt-get", append(args, "-qq", "update")...); err != nil {
		return "", err
	}
	install := append(append(args, "-qq", "--download-only", "--no-install-recommends", "-y", "install"), userlandPackages...)
	if _, err := f.run(ctx, "", "apt-get", install...); err != nil {
		return "", err
	}
	debs, _ := filepath.Glob(filepath.Join(a, "cache", "archives", "*.deb"))
	if len(debs) == 0 {
		return "", fmt.Errorf("apt-get downloaded no packages into %s", filepath.Join(a, "cache", "archives"))
	}
	tmp := root + ".new"
	_ = os.RemoveAll(tmp)
	for _, deb := range debs {
		if _, err := f.run(ctx, "", "dpkg", "-x", deb, tmp); err != nil {
			return "", err
		}
	}
	// Documentation and translations no guest reads: a third of it.
	for _, d := range []string{"usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info"} {
		_ = os.RemoveAll(filepath.Join(tmp, d))
	}
	for _, d := range userlandDirs {
		if err := os.MkdirAll(filepath.Join(tmp, d), 0o755); err != nil {
			return "", err
		}
	}
	// What the tests look up by name (a user, a group) and what the
	// guest's C library asks for.
	for name, data := range map[string]string{
		"etc/passwd":   "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"etc/group":    "root:x:0:\nnogroup:x:65534:\n",
		"etc/hostname": "nwkernel\n",
	} {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(data), 0o644); err != nil {
			return "", err
		}
	}
	// dash's maintainer script makes /bin/sh, which dpkg -x does not run.
	if _, err := os.Lstat(filepath.Join(tmp, "bin/sh")); err != nil {
		if err := os.Symlink("dash", filepath.Join(tmp, "bin/sh")); err != nil {
			return "", err
		}
	}
	for _, tool := range []string{"bin/bash", "bin/sh", "sbin/sysctl", "sbin/modprobe", "bin/ip", "sbin/tc", "usr/bin/prlimit", "usr/bin/setpriv", "bin/busybox"} {
		if _, err := os.Lstat(filepath.Join(tmp, tool)); err != nil {
			return "", fmt.Errorf("the %s userland has no /%s: %w", arch, tool, err)
		}
	}
	_ = os.RemoveAll(root)
	if err := os.Rename(tmp, root); err != nil {
		return "", err
	}
	// Userlands of older lists of packages: no image uses them now.
	old, _ := filepath.Glob(filepath.Join(f.Dir, "userland-"+arch+"-*"))
	for _, o := range old {
		if o != root && o != done {
			_ = os.RemoveAll(o)
		}
	}
	for _, deb := range debs {
		_ = os.Remove(deb)
	}
	return root, os.WriteFile(done, []byte(strings.Join(userlandPackages, "\n")+"\n"), 0o644)
}
