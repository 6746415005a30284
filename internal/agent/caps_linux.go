package agent

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Capability numbers (include/uapi/linux/capability.h).
const (
	capNetAdmin = 12
	capNetRaw   = 13
	capBPF      = 39
	capSysAdmin = 21
	capPerfmon  = 38
)

// effectiveCaps reads the effective capability set of this process.
func effectiveCaps() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n
		}
	}
	return 0
}

func hasCap(caps uint64, c uint) bool { return caps&(1<<c) != 0 }
