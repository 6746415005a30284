package kernels

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// A Kernel is one row of the matrix: a Debian release's kernel series.
type Kernel struct {
	Name  string // the series, as operators say it: "6.1"; "newest" for the newest the archive serves; "arm64-6.1" on arm64
	Suite string // the Debian suite whose linux-image-ARCH it is
	Who   string // who runs it
	Arch  string // Debian's name of the architecture: "" is amd64
}

// Architecture is the kernel's Debian architecture: amd64 or arm64.
func (k Kernel) Architecture() string {
	if k.Arch == "" {
		return "amd64"
	}
	return k.Arch
}

// Native reports whether the kernel runs the host's own binaries (the
// guest mounts the host's root): amd64. An arm64 guest runs a root of
// Debian's arm64 packages and test binaries built for arm64.
func (k Kernel) Native() bool { return k.Architecture() == "amd64" }

// Newest names the kernel of the archive's newest suite, whatever series
// that is today.
const Newest = "newest"

// Debian lists the kernels the matrix boots, oldest first.
var Debian = []Kernel{
	{Name: "5.10", Suite: "bullseye", Who: "Debian 11"},
	{Name: "6.1", Suite: "bookworm", Who: "Debian 12, Amazon Linux 2023"},
	{Name: "6.12", Suite: "trixie", Who: "Debian 13"},
	// The newest series: what rolling distributions and the next LTS
	// releases run, and where changes to tracepoint arguments, BTF and
	// the tracing attach types show first.
	{Name: Newest, Suite: "trixie-backports", Who: "rolling distributions, Fedora, the next LTS releases"},
	// The same Debian releases on arm64 (AWS Graviton, Ampere, edge
	// boards), booted on an emulated Neoverse N1 (Graviton2's core).
	// What differs there is what the tracer leans on: fentry attaches to
	// kernel functions on arm64 from 6.4 (ftrace's direct calls), not
	// 5.5 as on x86; the JIT and the verifier's per-architecture rules;
	// the layouts CO-RE relocates.
	{Name: "arm64-5.10", Suite: "bullseye", Arch: "arm64", Who: "Debian 11 on arm64; Amazon Linux 2's 5.10 on Graviton"},
	{Name: "arm64-6.1", Suite: "bookworm", Arch: "arm64", Who: "Debian 12 on arm64, Amazon Linux 2023 on Graviton"},
	{Name: "arm64-6.12", Suite: "trixie", Arch: "arm64", Who: "Debian 13 on arm64 (Graviton, Ampere)"},
}

// Names lists the series the matrix knows, for flags and messages.
func Names() []string {
	var out []string
	for _, k := range Debian {
		out = append(out, k.Name)
	}
	return out
}

// Series is what a release's row is called: "7.3" of "7.3.4+deb13-amd64".
func Series(release string) string {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return release
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	return parts[0] + "." + minor
}

// Lookup returns the kernel of a series name.
func Lookup(name string) (Kernel, bool) {
	for _, k := range Debian {
		if k.Name == name {
			return k, true
		}
	}
	return Kernel{}, false
}

// ArchiveURI finds the Debian archive the machine already uses in its APT
// sources (one-line or deb822 format): the URI of the first source that
// serves a release suite (not -security, -updates or -backports) with the
// main component. The matrix asks the same archive for the other suites.
func ArchiveURI(r io.Reader) (string, error) {
	var (
		uris, suites, comps []string
		found               string
	)
	consider := func() {
		if found != "" || len(uris) == 0 {
			return
		}
		hasMain := false
		for _, c := range comps {
			hasMain = hasMain || c == "main"
		}
		for _, s := range suites {
			if hasMain && !strings.Contains(s, "-") && !strings.Contains(s, "/") {
				found = strings.TrimSuffix(uris[0], "/")
				return
			}
		}
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			// deb822 stanzas end at a blank line.
			consider()
			uris, suites, comps = nil, nil, nil
			continue
		}
		if f := strings.Fields(line); f[0] == "deb" {
			// One-line format: deb [options] uri suite component...
			f = f[1:]
			if len(f) > 0 && strings.HasPrefix(f[0], "[") {
				for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
					f = f[1:]
				}
				if len(f) > 0 {
					f = f[1:]
				}
			}
			if len(f) >= 3 {
				uris, suites, comps = f[:1], f[1:2], f[2:]
				consider()
				uris, suites, comps = nil, nil, nil
			}
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "uris":
			uris = strings.Fields(val)
		case "suites":
			suites = strings.Fields(val)
		case "components":
			comps = strings.Fields(val)
		}
	}
	consider()
	if err := sc.Err(); err != nil {
		return "", err
	}
	if found == "" {
		return "", fmt.Errorf("no Debian release suite with the main component in the APT sources")
	}
	return found, nil
}
