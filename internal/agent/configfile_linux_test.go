package agent

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/internal/options"
	"golang.org/x/sys/unix"
)

// TestConfigFileBounded: a configuration file that is not a regular file
// (a FIFO nobody writes to, /dev/zero), larger than a ConfigMap, or a
// list of half a million interface regexes is refused at once with one
// line that says what to give instead, and costs the agent no memory.
func TestConfigFileBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("remediation: \"on\"\n#"+strings.Repeat("x", options.MaxFile)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// 1 MiB, the size of a ConfigMap, of "e,": 10 s and 819 MB to start
	// before the bound.
	bomb := filepath.Join(dir, "bomb.yaml")
	body := "exclude-interfaces: \"" + strings.Repeat("e,", (options.MaxFile-64)/2) + "e\"\n"
	if err := os.WriteFile(bomb, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	long := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(long, []byte("exclude-interfaces: \""+strings.Repeat("e", 4096)+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		fifo:        "is not a regular file (p---------): give a file",
		"/dev/zero": "is not a regular file",
		big:         "more than the 1048576 a configuration file may hold",
		bomb:        "more than 256: join them into fewer",
		long:        "an interface regex of 4096 bytes, more than 1024",
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := load([]string{"--config.file", file}, io.Discard)
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", file, err, want)
		}
		// The file itself may be read (1 MiB, and YAML's copies of it);
		// half a million compiled regexes took 800 MB.
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("%s: loading allocated %d MiB", file, grew>>20)
		}
	}
	// The same list, as many regexes as allowed, loads.
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("exclude-interfaces: \""+strings.TrimSuffix(strings.Repeat("e,", options.MaxPatterns), ",")+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := load([]string{"--config.file", ok}, io.Discard); err != nil || len(st.cfg.Mirror.Interfaces.Exclude) != options.MaxPatterns {
		t.Errorf("%d regexes: %v", options.MaxPatterns, err)
	}
}
