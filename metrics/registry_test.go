package metrics

import (
	"runtime/debug"
	"testing"

	"github.com/prometheus/common/version"
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

// TestBuildInfoLabels: the build's fields, set as make sets them, are
// the labels of neighwatch_build_info.
func TestBuildInfoLabels(t *testing.T) {
	defer func(v, r, b string) { version.Version, version.Revision, version.Branch = v, r, b }(version.Version, version.Revision, version.Branch)
	version.Version, version.Revision, version.Branch = "1.2.3", "abc1234", "main"
	reg, err := NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "neighwatch_build_info" {
			continue
		}
		got := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["version"] != "1.2.3" || got["revision"] != "abc1234" || got["branch"] != "main" {
			t.Errorf("neighwatch_build_info labels %v", got)
		}
		return
	}
	t.Error("no neighwatch_build_info")
}
