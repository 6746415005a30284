package metrics

import (
	"runtime/debug"
	"testing"
)

func TestVCSRevision(t *testing.T) {
	bi := func(kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{}
		for i := 0; i+1 < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{bi("vcs.revision", "51453c5a7e0b5d7b9f4c1e2d3a4b5c6d7e8f9a0b", "vcs.modified", "false"), true, "51453c5"},
		{bi("vcs.revision", "51453c5a7e0b5d7b9f4c1e2d3a4b5c6d7e8f9a0b", "vcs.modified", "true"), true, "51453c5-dirty"},
		{bi(), true, "unknown"},
		{nil, false, "unknown"},
	} {
		if got := vcsRevision(tc.bi, tc.ok); got != tc.want {
			t.Errorf("vcsRevision = %q, want %q", got, tc.want)
		}
	}
}
