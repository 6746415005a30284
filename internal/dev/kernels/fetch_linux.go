package kernels

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
)

// Image is a Debian kernel unpacked and ready to boot.
type Image struct {
	Kernel    Kernel
	Package   string // the linux-image package, e.g. linux-image-6.1.0-50-amd64
	Version   string // its Debian version
	Release   string // what uname -r says
	Root      string // where the packages were unpacked
	Vmlinuz   string
	Modules   string // the directory that is /lib/modules/RELEASE in the guest
	Initramfs string
	// Userland is the root the guest mounts, for a kernel that does not
	// run the host's binaries (arm64): Debian's packages of that
	// architecture, unpacked. "" is the host's own root.
	Userland string
}

// Fetcher fetches Debian kernels with APT into Dir, from Archive (the
// archive the machine uses; see ArchiveURI), and keeps them there: a
// second run reuses what it finds unless Refresh is set.
type Fetcher struct {
	Dir     string
	Archive string
	Keyring string // signed-by for the temporary sources list; "" uses APT's trusted keys
	Refresh bool
	Log     io.Writer
}

// busyboxPath is the static busybox the initramfs runs (busybox-static).
const busyboxPath = "/bin/busybox"

// Fetch returns the images of ks, fetching and unpacking what is missing.
// It holds the cache's lock meanwhile: make test runs the matrix and the
// package tests (one of which boots a kernel) at once, and two fetches
// into one cache would write the same files.
func (f *Fetcher) Fetch(ctx context.Context, ks []Kernel) ([]Image, error) {
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return nil, err
	}
	// Every image already here, its initramfs current: no lock, so a run
	// that only reads the cache does not wait for another fetching other
	// kernels (make test fetches the matrix's while the boot test boots).
	// An index is renamed into place once its image is complete (save).
	if imgs, ok := f.allCached(ks); ok {
		return imgs, nil
	}
	lock, err := os.OpenFile(filepath.Join(f.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("lock the kernel cache %s: %w", f.Dir, err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN) //nolint:errcheck // closing unlocks too
	out := make([]Image, len(ks))
	var missing []int
	for i, k := range ks {
		img, err := f.cached(k)
		if err != nil || f.Refresh {
			missing = append(missing, i)
			continue
		}
		// A userland of an older list of packages is made again, and
		// with it the initramfs (its busybox is the userland's).
		if f.userlandStale(img) {
			if img.Userland, err = f.userland(ctx, k.Architecture()); err != nil {
				return nil, fmt.Errorf("kernel %s: the %s userland: %w", k.Name, k.Architecture(), err)
			}
			img.Initramfs = ""
		}
		// An initramfs of an older init script is made again, not the
		// kernel fetched again.
		if want := initramfsPath(img.Root); img.Initramfs != want {
			img.Initramfs = want
			if err := f.initramfs(ctx, img); err != nil {
				return nil, fmt.Errorf("kernel %s: %w", k.Name, err)
			}
			if err := f.save(img); err != nil {
				return nil, err
			}
		}
		out[i] = img
	}
	if len(missing) == 0 {
		return out, nil
	}
	byArch := map[string][]Kernel{}
	var arches []string
	for _, i := range missing {
		a := ks[i].Architecture()
		if byArch[a] == nil {
			arches = append(arches, a)
		}
		byArch[a] = append(byArch[a], ks[i])
	}
	for _, a := range arches {
		if err := f.update(ctx, a, byArch[a]); err != nil {
			return nil, err
		}
	}
	for _, i := range missing {
		img, err := f.fetch(ctx, ks[i])
		if err != nil {
			return nil, fmt.Errorf("kernel %s (%s): %w", ks[i].Name, ks[i].Suite, err)
		}
		out[i] = img
	}
	return out, nil
}

func (f *Fetcher) indexPath(k Kernel) string {
	if k.Native() {
		return filepath.Join(f.Dir, k.Suite+".json")
	}
	return filepath.Join(f.Dir, k.Suite+"-"+k.Architecture()+".json")
}

// cached returns an image unpacked by an earlier run.
func (f *Fetcher) cached(k Kernel) (Image, error) {
	b, err := os.ReadFile(f.indexPath(k))
	if err != nil {
		return Image{}, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return Image{}, err
	}
	paths := []string{img.Root, img.Vmlinuz, img.Modules}
	if !k.Native() {
		paths = append(paths, img.Userland)
	}
	for _, p := range paths {
		if p == "" {
			return Image{}, errors.New("an index of an older run")
		}
		if _, err := os.Stat(p); err != nil {
			return Image{}, err
		}
	}
	if _, err := os.Stat(img.Initramfs); err != nil {
		img.Initramfs = "" // made again by Fetch
	}
	img.Kernel = k
	return img, nil
}

// allCached returns the images of ks if every one is in the cache as
// this run would use it.
func (f *Fetcher) allCached(ks []Kernel) ([]Image, bool) {
	if f.Refresh {
		return nil, false
	}
	out := make([]Image, len(ks))
	for i, k := range ks {
		img, err := f.cached(k)
		if err != nil || img.Initramfs != initramfsPath(img.Root) || f.userlandStale(img) {
			return nil, false
		}
		out[i] = img
	}
	return out, true
}

// save writes the image's index, for the next run: aside, then renamed
// into place, so a reader without the lock sees a whole one or none.
func (f *Fetcher) save(img Image) error {
	b, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return err
	}
	tmp := f.indexPath(img.Kernel) + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.indexPath(img.Kernel))
}

// initramfsPath names the initramfs after its init script, so a changed
// script makes a new one.
func initramfsPath(root string) string {
	sum := sha256.Sum256([]byte(initScript))
	return filepath.Join(root, "initramfs-"+hex.EncodeToString(sum[:4])+".gz")
}

// aptDir is where APT keeps the lists of one architecture's packages.
func (f *Fetcher) aptDir(arch string) string {
	if arch == "amd64" {
		return filepath.Join(f.Dir, "apt")
	}
	return filepath.Join(f.Dir, "apt-"+arch)
}

// aptArgs points APT at the private directory of one architecture's
// kernel packages.
func (f *Fetcher) aptArgs(arch string) []string { return aptOptions(f.aptDir(arch), arch) }

// aptOptions points APT at a private sources list, lists and cache under
// dir, for arch's packages, so the machine's own APT state is never
// touched.
func aptOptions(dir, arch string) []string {
	args := []string{
		"-o", "Dir::Etc::SourceList=" + filepath.Join(dir, "sources.list"),
		"-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::State::Lists=" + filepath.Join(dir, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(dir, "cache"),
		"-o", "APT::Sandbox::User=root",
		"-o", "Debug::NoLocking=1",
	}
	if arch != "amd64" {
		args = append(args, "-o", "APT::Architecture="+arch, "-o", "APT::Architectures="+arch)
	}
	return args
}

// aptSources makes the private directory dir and its sources list: the
// archive's suites, main.
func (f *Fetcher) aptSources(dir string, suites []string) error {
	for _, d := range []string{"lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	opt := ""
	if f.Keyring != "" {
		opt = "[signed-by=" + f.Keyring + "] "
	}
	var src strings.Builder
	for _, s := range suites {
		fmt.Fprintf(&src, "deb %s%s %s main\n", opt, f.Archive, s)
	}
	return os.WriteFile(filepath.Join(dir, "sources.list"), []byte(src.String()), 0o644)
}

func (f *Fetcher) update(ctx context.Context, arch string, ks []Kernel) error {
	var suites []string
	for _, k := range ks {
		suites = append(suites, k.Suite)
	}
	if err := f.aptSources(f.aptDir(arch), suites); err != nil {
		return err
	}
	f.logf("fetching the %s package lists of %s from %s", arch, strings.Join(suites, ", "), f.Archive)
	_, err := f.run(ctx, "", "apt-get", append(f.aptArgs(arch), "-qq", "update")...)
	return err
}

// imageRE finds the kernel package a metapackage installs: the
// linux-image-RELEASE it depends on, with its version.
var imageRE = regexp.MustCompile(`(?m)^Depends: .*?\b(linux-image-[0-9][^ ,]*) \(= ([^)]+)\)`)

// partsRE finds the packages a kernel package of Debian's 7.x packaging
// depends on for the kernel itself and its modules: its linux-image
// package holds neither.
var partsRE = regexp.MustCompile(`\b(linux-(?:binary|modules)-[0-9][^ ,]*) \(= ([^)]+)\)`)

func (f *Fetcher) fetch(ctx context.Context, k Kernel) (Image, error) {
	// The suite's linux-image-ARCH names the kernel package it installs.
	arch := k.Architecture()
	meta := "linux-image-" + arch + "/" + k.Suite
	show, err := f.run(ctx, "", "apt-cache", append(f.aptArgs(arch), "show", meta)...)
	if err != nil {
		return Image{}, err
	}
	m := imageRE.FindStringSubmatch(show)
	if m == nil {
		return Image{}, fmt.Errorf("%s names no kernel package:\n%s", meta, show)
	}
	img := Image{Kernel: k, Package: m[1], Version: m[2]}
	pkgs := []string{img.Package}
	// Debian's 7.x packaging: the image package is empty but for its
	// dependencies, the kernel (linux-binary) and its modules
	// (linux-modules).
	detail, err := f.run(ctx, "", "apt-cache", append(f.aptArgs(arch), "show", img.Package+"="+img.Version)...)
	if err != nil {
		return Image{}, err
	}
	for _, dep := range partsRE.FindAllStringSubmatch(firstStanzaDepends(detail), -1) {
		if dep[2] == img.Version {
			pkgs = append(pkgs, dep[1])
		}
	}
	debs := filepath.Join(f.Dir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return Image{}, err
	}
	root := filepath.Join(f.Dir, "root", img.Package+"_"+img.Version)
	_ = os.RemoveAll(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Image{}, err
	}
	img.Root = root
	for _, pkg := range pkgs {
		f.logf("kernel %s: downloading %s %s", k.Name, pkg, img.Version)
		deb, err := f.download(ctx, arch, debs, pkg, img.Version)
		if err != nil {
			return Image{}, err
		}
		if _, err := f.run(ctx, "", "dpkg", "-x", deb, root); err != nil {
			return Image{}, err
		}
		_ = os.Remove(deb) // unpacked: the package itself is not needed again
	}
	if err := img.locate(); err != nil {
		return Image{}, fmt.Errorf("%s: %w", strings.Join(pkgs, ", "), err)
	}
	base := filepath.Dir(filepath.Dir(filepath.Dir(img.Modules)))
	if _, err := f.run(ctx, "", "depmod", "-b", base, img.Release); err != nil {
		return Image{}, err
	}
	if !k.Native() {
		if img.Userland, err = f.userland(ctx, arch); err != nil {
			return Image{}, fmt.Errorf("the %s userland: %w", arch, err)
		}
	}
	img.Initramfs = initramfsPath(root)
	if err := f.initramfs(ctx, img); err != nil {
		return Image{}, err
	}
	return img, f.save(img)
}

// firstStanzaDepends is the Depends line of the first stanza apt-cache
// printed.
func firstStanzaDepends(show string) string {
	stanza, _, _ := strings.Cut(show, "\n\n")
	for _, l := range strings.Split(stanza, "\n") {
		if strings.HasPrefix(l, "Depends: ") {
			return l
		}
	}
	return ""
}

// download fetches one package of one version into dir and returns its
// path.
func (f *Fetcher) download(ctx context.Context, arch, dir, pkg, version string) (string, error) {
	if _, err := f.run(ctx, dir, "apt-get", append(f.aptArgs(arch), "-qq", "download", pkg+"="+version)...); err != nil {
		return "", err
	}
	found, _ := filepath.Glob(filepath.Join(dir, pkg+"_*.deb"))
	for _, d := range found {
		if strings.Contains(filepath.Base(d), "_"+strings.ReplaceAll(version, ":", "%3a")+"_") {
			return d, nil
		}
	}
	return "", fmt.Errorf("apt-get download left no %s %s in %s", pkg, version, dir)
}

// locate finds the kernel and its modules in the unpacked packages: the
// kernel in /boot (Debian up to 6.x) or beside its modules (7.x), the
// modules under /lib or /usr/lib (Debian 13 moved them).
func (img *Image) locate() error {
	var mods []string
	for _, g := range []string{"lib/modules/*", "usr/lib/modules/*"} {
		m, _ := filepath.Glob(filepath.Join(img.Root, g))
		mods = append(mods, m...)
	}
	if len(mods) != 1 {
		return fmt.Errorf("%d module trees, want 1: %v", len(mods), mods)
	}
	img.Modules = mods[0]
	img.Release = filepath.Base(mods[0])
	for _, p := range []string{filepath.Join(img.Root, "boot", "vmlinuz-"+img.Release), filepath.Join(img.Modules, "vmlinuz")} {
		if _, err := os.Stat(p); err == nil {
			img.Vmlinuz = p
			return nil
		}
	}
	return fmt.Errorf("no kernel for %s in /boot or beside its modules", img.Release)
}

// initModules are what the initramfs loads to mount the shared root.
var initModules = []string{"virtio_pci", "9pnet_virtio", "9p"}

// initScript runs as PID 1 in the initramfs: it loads the 9p modules,
// mounts the host's root read-only and hands over to the guest script,
// whose path is on the kernel command line (nw.init=PATH).
const initScript = `#!/bin/busybox sh
/bin/busybox mkdir -p /proc /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t devtmpfs dev /dev
for m in $(/bin/busybox cat /modules/order); do /bin/busybox insmod /modules/$m || echo "nwinit: insmod $m failed"; done
shares=
for a in $(/bin/busybox cat /proc/cmdline); do case $a in nw.shares=*) shares=${a#nw.shares=};; esac; done
fail() { echo "nwinit: $1"; echo o > /proc/sysrq-trigger; /bin/busybox sleep 60; }
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose hostroot /newroot || fail "mounting the host root failed"
# The shares, each at a fixed path under a tmpfs over the host's /mnt:
# results, the kernel's modules, the checkout, the test binaries.
/bin/busybox mount -t tmpfs tmpfs /newroot/mnt || fail "no /mnt on the host's root to mount the shares under"
for tag in $(echo "$shares" | /bin/busybox tr , ' '); do
	/bin/busybox mkdir -p /newroot/mnt/nw/$tag
	/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 $tag /newroot/mnt/nw/$tag || fail "mounting share $tag failed"
done
/bin/busybox umount /proc
/bin/busybox umount /dev
exec /bin/busybox switch_root /newroot /bin/bash /mnt/nw/results/guest.sh
`

func (f *Fetcher) initramfs(ctx context.Context, img Image) error {
	// The initramfs runs the kernel's architecture: the host's busybox,
	// or the one of the guest's userland.
	bbPath := busyboxPath
	if img.Userland != "" {
		bbPath = filepath.Join(img.Userland, busyboxPath)
	}
	bb, err := os.ReadFile(bbPath)
	if err != nil {
		return fmt.Errorf("the initramfs needs a static busybox (Debian's busybox-static): %w", err)
	}
	if err := checkStatic(bbPath); err != nil {
		return err
	}
	files := map[string]File{
		"bin":         {Dir: true, Mode: 0o755},
		"bin/busybox": {Data: bb, Mode: 0o755},
		"init":        {Data: []byte(initScript), Mode: 0o755},
		"modules":     {Dir: true, Mode: 0o755},
	}
	// One module at a time: a kernel may have one built in (7.x has
	// virtio_pci), and modprobe answers for that one only with an error
	// when the package has no modules.builtin to say so. The boot says
	// plainly if one was really missing: the shares do not mount.
	var deps string
	for _, m := range initModules {
		out, err := f.run(ctx, "", "modprobe", "-d", filepath.Dir(filepath.Dir(filepath.Dir(img.Modules))), "-S", img.Release, "--show-depends", m)
		if err != nil {
			f.logf("kernel %s: no module %s: taken as built in (%v)", img.Kernel.Name, m, err)
			continue
		}
		deps += out
	}
	var order []string
	seen := map[string]bool{}
	for _, line := range strings.Split(deps, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "insmod" || seen[fields[1]] {
			continue
		}
		seen[fields[1]] = true
		data, err := readModule(fields[1])
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(fields[1]), ".xz"), ".zst")
		files["modules/"+name] = File{Data: data, Mode: 0o644}
		order = append(order, name)
	}
	files["modules/order"] = File{Data: []byte(strings.Join(order, "\n") + "\n"), Mode: 0o644}
	out, err := os.Create(img.Initramfs)
	if err != nil {
		return err
	}
	if err := WriteInitramfs(out, files); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// readModule reads a kernel module, decompressed: busybox's insmod takes
// plain ELF only.
func readModule(path string) ([]byte, error) {
	var tool string
	switch {
	case strings.HasSuffix(path, ".xz"):
		tool = "xz"
	case strings.HasSuffix(path, ".zst"):
		tool = "zstd"
	default:
		return os.ReadFile(path)
	}
	out, err := exec.Command(tool, "-dc", path).Output()
	if err != nil {
		return nil, fmt.Errorf("decompress %s with %s: %w", path, tool, err)
	}
	return out, nil
}

func checkStatic(path string) error {
	e, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer e.Close()
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the initramfs needs a static one (Debian's busybox-static)", path)
		}
	}
	return nil
}

func (f *Fetcher) run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, lastLines(stderr.String(), 5))
	}
	return string(out), nil
}

func (f *Fetcher) logf(format string, args ...any) {
	if f.Log != nil {
		fmt.Fprintf(f.Log, format+"\n", args...)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
