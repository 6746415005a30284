package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/table"
)

func runStatus(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print a JSON array")
	sock := fs.String("control.socket", control.DefaultSocket, "the agent's control socket")
	iface := fs.String("interface", "", "only entries on this interface")
	state := fs.String("state", "", "only entries in this NUD state (stale, reachable, delay, probe, failed, incomplete, permanent, noarp)")
	class := fs.String("class", "", "only entries of this class ("+classNames()+")")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *class != "" && !slices.ContainsFunc(table.Classes(), func(c table.Class) bool { return c.String() == *class }) {
		return errUsage{Err: fmt.Errorf("--class %q: no such class (want %s)", *class, classNames())}
	}
	all, err := control.NewClient(*sock).Status(ctx)
	if err != nil {
		return err
	}
	var entries []control.Entry
	for _, e := range all {
		if (*iface == "" || e.Interface == *iface) && (*state == "" || strings.EqualFold(e.State, *state)) && (*class == "" || e.Class == *class) {
			entries = append(entries, e)
		}
	}
	if *asJSON {
		if entries == nil {
			entries = []control.Entry{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(entries)
	}
	printStatus(stdout, entries)
	return nil
}

// classNames lists the classes an entry can have, as status prints them.
func classNames() string {
	var names []string
	for _, c := range table.Classes() {
		names = append(names, c.String())
	}
	return strings.Join(names, ", ")
}

func printStatus(w io.Writer, entries []control.Entry) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IP\tFAMILY\tDEV\tLLADDR\tSTATE\tAGE\tFLAGS\tARP SEEN\tOTHER MACS\tBYPASS\tCLASS")
	for _, e := range entries {
		other := "-"
		if len(e.OtherMACs) > 0 {
			var ms []string
			for _, h := range e.OtherMACs {
				ms = append(ms, h.MAC)
			}
			other = strings.Join(ms, ",")
		}
		seen := "-"
		if e.SeenLLAddr != "" {
			seen = e.SeenLLAddr
			if e.Mismatch {
				seen += " (mismatch)"
			}
		}
		for i, f := range e.Flags {
			if f == "managed" && e.ManagedBy != "" {
				e.Flags[i] = "managed (" + e.ManagedBy + ")"
			}
		}
		flags := strings.Join(e.Flags, ",")
		if flags == "" {
			flags = "-"
		}
		ll := e.LLAddr
		if ll == "" {
			ll = "-"
		}
		class := e.Class
		if e.SuspectAgeSeconds != nil && class != "stuck" {
			class += " (suspect)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.IP, e.Family, e.Interface, ll, strings.ToUpper(e.State),
			fmtAge(e.StateAgeSeconds), flags, seen, other, e.BypassPackets, class)
	}
	tw.Flush()
}

func fmtAge(s float64) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%.1fs", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", int(s)/60, int(s)%60)
	}
	return fmt.Sprintf("%dh%02dm", int(s)/3600, int(s)%3600/60)
}

func runEvents(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	sock := fs.String("control.socket", control.DefaultSocket, "the agent's control socket")
	if err := parse(fs, args); err != nil {
		return err
	}
	// Lines go out through a buffer flushed every eventsFlush, not a
	// write each: at a million entries and 10,000 changes a second the
	// stream carries over 17,000 events a second, and a write an event
	// kept the client behind the agent, which then drops for it.
	out := newFlushingWriter(stdout, eventsFlush)
	defer out.Close()
	var err error
	if *asJSON {
		err = passJSON(ctx, control.NewClient(*sock), out)
	} else {
		err = control.NewClient(*sock).Events(ctx, func(ev control.Event) error { return printEvent(out, ev) })
	}
	if errors.Is(err, control.ErrStreamClosed) {
		return nil // the agent shut down cleanly: the stream is over
	}
	return err
}

// passJSON writes each event of the stream to out as the agent sent it,
// a JSON object a line, until ctx ends (nil) or the stream does.
func passJSON(ctx context.Context, c *control.Client, out io.Writer) error {
	return c.EventsJSON(ctx, func(line []byte) error {
		if _, err := out.Write(line); err != nil {
			return err
		}
		_, err := out.Write([]byte{'\n'})
		return err
	})
}

// printEvent writes one event as a line of text.
func printEvent(out io.Writer, ev control.Event) error {
	ll := ev.LLAddr
	if ev.OldLLAddr != "" && ev.OldLLAddr != ev.LLAddr {
		ll = ev.OldLLAddr + "->" + ev.LLAddr
	}
	_, err := fmt.Fprintf(out, "%s %s %s %s %s %s->%s %s cause=%s class=%s %s\n", ev.Time, ev.Kind, ev.Interface, ev.Family, ev.IP,
		strings.ToUpper(ev.From), strings.ToUpper(ev.To), ll, ev.Cause, ev.Class, ev.Detail)
	return err
}

// runDatapath: `neighwatch datapath` lists modes, `neighwatch datapath
// IFACE MODE` swaps one atomically.
func runDatapath(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("datapath", flag.ContinueOnError)
	sock := fs.String("control.socket", control.DefaultSocket, "the agent's control socket")
	asJSON := fs.Bool("json", false, "print a JSON object: interface -> mode")
	pos, err := parseArgs(fs, args, "[INTERFACE legacy|neigh]", 0, 2)
	if err != nil {
		return err
	}
	c := control.NewClient(*sock)
	var modes map[string]string
	switch len(pos) {
	case 0:
		if err := c.Get(ctx, "/v1/datapath", &modes); err != nil {
			return err
		}
	case 2:
		req := control.DatapathRequest{Interface: pos[0], Mode: pos[1]}
		if err := c.Post(ctx, "/v1/datapath", req, &modes); err != nil {
			return err
		}
	default:
		return errUsage{Err: fmt.Errorf("datapath: want no arguments (list) or INTERFACE MODE (swap)")}
	}
	if *asJSON {
		if modes == nil {
			modes = map[string]string{}
		}
		return json.NewEncoder(stdout).Encode(modes)
	}
	names := make([]string, 0, len(modes))
	for name := range modes {
		names = append(names, name)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INTERFACE\tMODE")
	for _, name := range names {
		fmt.Fprintf(tw, "%s\t%s\n", name, modes[name])
	}
	return tw.Flush()
}

// runTracer: `neighwatch tracer` shows how bypass packets are counted,
// every program the tracer tried and whether the kernel took it, each
// feature, and where detection is blind.
func runTracer(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tracer", flag.ContinueOnError)
	sock := fs.String("control.socket", control.DefaultSocket, "the agent's control socket")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseArgs(fs, args, "", 0, 0); err != nil {
		return err
	}
	var st control.TracerStatus
	if err := control.NewClient(*sock).Get(ctx, "/v1/tracer", &st); err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(st)
	}
	if !st.Running {
		fmt.Fprintf(stdout, "tracer not running: %s\n", st.Disabled)
	} else {
		fmt.Fprintf(stdout, "bypass counted by: %s\n", st.Mode)
		if st.Fallback != "" {
			fmt.Fprintf(stdout, "fentry refused: %s\n", st.Fallback)
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if len(st.Features) > 0 {
		fmt.Fprintln(tw, "\nFEATURE\tWORKING\tVIA\tWHY")
		for _, f := range st.Features {
			fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", f.Feature, f.Working, dash(f.Via), dash(f.Why))
		}
	}
	if len(st.Programs) > 0 {
		fmt.Fprintln(tw, "\nPROGRAM\tHOOK\tFEATURE\tLOADED\tREFUSAL")
		for _, p := range st.Programs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", p.Program, p.Hook, p.Feature, p.Loaded, dash(p.Refusal))
		}
	}
	var blind []control.DetectionEntry
	for _, d := range st.Detection {
		if !d.Working {
			blind = append(blind, d)
		}
	}
	if len(blind) > 0 {
		fmt.Fprintln(tw, "\nBLIND ON\tFEATURE\tWHY")
		for _, d := range blind {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", d.Interface, d.Feature, dash(d.Why))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(blind) == 0 && len(st.Detection) > 0 {
		fmt.Fprintf(stdout, "\nevery feature asked for works on every watched interface (%d checks)\n", len(st.Detection))
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// runRemediation: `neighwatch remediation status` shows the engine,
// `neighwatch remediation off|dry-run|on` switches it at runtime.
func runRemediation(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("remediation", flag.ContinueOnError)
	sock := fs.String("control.socket", control.DefaultSocket, "the agent's control socket")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseArgs(fs, args, "off|dry-run|on|status", 1, 1)
	if err != nil {
		return err
	}
	c := control.NewClient(*sock)
	var st control.RemediationStatus
	switch arg := pos[0]; arg {
	case "status":
		if err := c.Get(ctx, "/v1/remediation", &st); err != nil {
			return err
		}
	case "off", "dry-run", "on":
		if err := c.Post(ctx, "/v1/remediation", control.RemediationRequest{Mode: arg}, &st); err != nil {
			return err
		}
	default:
		return errUsage{Err: fmt.Errorf("remediation: unknown %q: want off, dry-run, on or status", arg)}
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(st)
	}
	fmt.Fprintf(stdout, "mode %s (from %s), scope %s, strategies %s, rate %.3g/s (per interface %.3g/s), queued %d, rate-limited %d, dropped %d\n",
		st.Mode, st.ModeSource, st.Scope, strings.Join(st.Strategies, ","), st.Rate, st.InterfaceRate, st.Queue, st.RateLimited, st.Dropped)
	for s, outs := range st.Actions {
		for o, n := range outs {
			fmt.Fprintf(stdout, "  %s %s: %d\n", s, o, n)
		}
	}
	return nil
}
