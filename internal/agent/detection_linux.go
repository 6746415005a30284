package agent

import (
	"fmt"
	"sort"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/remediate"
)

// detection says, per Ethernet interface the agent watches, whether each
// detection feature the configuration asks for works: the tracer's
// features unless --tracer=off, managed entries where remediation may use
// the manage strategy.
type detection struct {
	tracerWanted bool
	tracer       *tracerPart
	links        interface{ Links() map[int32]mirror.Link }
	engine       *remediate.Engine
}

var _ metrics.DetectionSource = (*detection)(nil)

// Detection implements metrics.DetectionSource.
func (d *detection) Detection() []metrics.Detection {
	var out []metrics.Detection
	links := d.links.Links()
	idxs := make([]int32, 0, len(links))
	for i, l := range links {
		if l.Watched && l.Ethernet {
			idxs = append(idxs, i)
		}
	}
	sort.Slice(idxs, func(a, b int) bool { return idxs[a] < idxs[b] })
	add := func(name, feature string, ok bool, why string) {
		if ok {
			why = ""
		}
		out = append(out, metrics.Detection{Interface: name, Feature: feature, Working: ok, Why: why})
	}
	if d.tracerWanted {
		d.tracerDetection(links, idxs, add)
	}
	for _, f := range remediate.Features(d.engine.Config()) {
		for _, i := range idxs {
			add(links[i].Name, f.Name, f.OK, f.Why)
		}
	}
	return out
}

func (d *detection) tracerDetection(links map[int32]mirror.Link, idxs []int32, add func(name, feature string, ok bool, why string)) {
	tr, fd := d.tracer.running()
	if tr == nil || fd == nil {
		err := d.tracer.Disabled()
		if err == nil {
			return // still loading: nothing to say yet
		}
		for _, i := range idxs {
			for _, f := range []bpf.Feature{bpf.FeatureBypass, bpf.FeatureSourceMAC, bpf.FeatureCreated} {
				add(links[i].Name, string(f), false, "tracer disabled: "+err.Error())
			}
		}
		return
	}
	fs := map[bpf.Feature]bpf.FeatureStatus{}
	for _, f := range tr.Features() {
		fs[f.Feature] = f
	}
	failed := tr.SourceFailures()
	unmirrored := fd.Unmirrored()
	for _, i := range idxs {
		name := links[i].Name
		by := fs[bpf.FeatureBypass]
		if n := unmirrored[i]; n > 0 && by.Working {
			by = bpf.FeatureStatus{Why: fmt.Sprintf("%d STALE entries did not fit in the tracer's maps (neighwatch_tracer_unmirrored_entries): their bypass traffic is not counted", n)}
		}
		add(name, string(bpf.FeatureBypass), by.Working, by.Why)
		src := fs[bpf.FeatureSourceMAC]
		why := src.Why
		if w := failed[int(i)]; w != "" {
			why = "source-MAC program not attached: " + w
		}
		add(name, string(bpf.FeatureSourceMAC), src.Working && failed[int(i)] == "", why)
		add(name, string(bpf.FeatureCreated), fs[bpf.FeatureCreated].Working, fs[bpf.FeatureCreated].Why)
	}
	// XDP programs can redirect to any interface: the series sits on the
	// interface that has one.
	for _, l := range links {
		if l.XDP {
			x := fs[bpf.FeatureXDPBypass]
			add(l.Name, string(bpf.FeatureXDPBypass), x.Working, x.Why)
		}
	}
}

// status is GET /v1/tracer.
func (d *detection) status() control.TracerStatus {
	st := control.TracerStatus{Mode: string(bpf.TracerOff), Features: []control.TracerFeature{}, Programs: []control.TracerProgram{}}
	if tr, _ := d.tracer.running(); tr != nil {
		st.Running, st.Mode = true, string(tr.Mode())
		if fb := tr.Fallback(); fb != nil {
			st.Fallback = fb.Error()
		}
		for _, f := range tr.Features() {
			st.Features = append(st.Features, control.TracerFeature{Feature: string(f.Feature), Working: f.Working, Via: f.Via, Why: f.Why})
		}
		for _, p := range tr.Programs() {
			st.Programs = append(st.Programs, control.TracerProgram{Program: p.Program, Hook: p.Hook, Feature: string(p.Feature),
				Loaded: p.Loaded, Refusal: string(p.Refusal), Error: p.Error, Needs: p.Needs})
		}
	} else if err := d.tracer.Disabled(); err != nil {
		st.Disabled = err.Error()
	} else if !d.tracerWanted {
		st.Disabled = "--tracer=off"
	}
	st.Detection = []control.DetectionEntry{}
	for _, det := range d.Detection() {
		st.Detection = append(st.Detection, control.DetectionEntry{Interface: det.Interface, Feature: det.Feature, Working: det.Working, Why: det.Why})
	}
	return st
}
