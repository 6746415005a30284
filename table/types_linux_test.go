package table

import (
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The table cannot import golang.org/x/sys/unix and still build on every
// OS, so its kernel constants are literals; on Linux they must equal the
// uapi values.
func TestConstantsMatchUAPI(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint32
	}{
		{"NUD_INCOMPLETE", uint32(StateIncomplete), unix.NUD_INCOMPLETE},
		{"NUD_REACHABLE", uint32(StateReachable), unix.NUD_REACHABLE},
		{"NUD_STALE", uint32(StateStale), unix.NUD_STALE},
		{"NUD_DELAY", uint32(StateDelay), unix.NUD_DELAY},
		{"NUD_PROBE", uint32(StateProbe), unix.NUD_PROBE},
		{"NUD_FAILED", uint32(StateFailed), unix.NUD_FAILED},
		{"NUD_NOARP", uint32(StateNoARP), unix.NUD_NOARP},
		{"NUD_PERMANENT", uint32(StatePermanent), unix.NUD_PERMANENT},
		{"NUD_NONE", uint32(StateNone), unix.NUD_NONE},
		{"NTF_PROXY", uint32(FlagProxy), unix.NTF_PROXY},
		{"NTF_EXT_LEARNED", uint32(FlagExtLearned), unix.NTF_EXT_LEARNED},
		{"NTF_ROUTER", uint32(FlagRouter), unix.NTF_ROUTER},
		{"NTF_EXT_MANAGED", FlagExtManaged, netlink.NTF_EXT_MANAGED},
		{"AF_INET", uint32(FamilyInet), unix.AF_INET},
		{"AF_INET6", uint32(FamilyInet6), unix.AF_INET6},
	} {
		if c.got != c.want {
			t.Errorf("%s: table has %#x, uapi %#x", c.name, c.got, c.want)
		}
	}
}
