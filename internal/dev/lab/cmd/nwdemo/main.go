// Command nwdemo shows the failure neighwatch exists for, and its repair,
// on the lab, narrated step by step (`make demo`, as root):
//
//  1. a client, a node and a backend in network namespaces; the node
//     forwards the backend's replies with a bpf_redirect() datapath;
//  2. the agent on the node; traffic flows;
//  3. the client moves to a new MAC behind the node's back: replies
//     black-hole, the entry is stuck, the alert's series is in /metrics;
//  4. remediation on: the entry is repaired and traffic comes back.
//
// It removes every namespace and process it made when it ends, on Ctrl-C
// too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

const metricsAddr = "127.0.0.1:9947" // inside the node's namespace

func main() {
	bin := flag.String("neighwatch", "bin/neighwatch", "the neighwatch binary")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: nwdemo [--neighwatch PATH]\n\nRuns the neighwatch demo on a lab of network namespaces (root).\n\nflags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	err := run(ctx, *bin)
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Println("\ninterrupted: everything the demo made is removed.")
		os.Exit(130)
	case err != nil:
		fmt.Fprintf(os.Stderr, "nwdemo: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("\ndone in %s; every namespace and process the demo made is removed.\n", time.Since(start).Round(time.Second))
}

func say(format string, args ...any) { fmt.Printf("\n==> "+format+"\n", args...) }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// until polls cond every 200 ms for at most d.
func until(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v", what, d)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, bin string) error {
	if ok, why := lab.Privileged(); !ok {
		return fmt.Errorf("the demo %s", why)
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%v: build it first (make build)", err)
	}
	say("Building the lab: client <-> node <-> backend, three network namespaces")
	l, err := lab.Build("demo")
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Printf("    client %s (%s), node %s, backend %s (%s)\n", l.Client.Name, lab.ClientIP, l.Node.Name, l.Backend.Name, lab.BackendIP)
	if err := l.PinClientToNode(); err != nil {
		return err
	}
	mac, err := l.Client.MAC(lab.ClientIf)
	if err != nil {
		return err
	}
	// The node already knows the client (STALE, as after any quiet
	// spell), and the backend knows the node.
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, mac, "stale"); err != nil {
		return err
	}
	if err := l.Node.Sysctl("net.ipv4.neigh."+lab.NodeClientIf+".gc_stale_time", "3600"); err != nil {
		return err
	}
	if err := l.Backend.Ping(lab.NodeBackendIP, 1, 2*time.Second); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "nwdemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "nw.sock")
	say("Starting neighwatch on the node, with its eBPF datapath on %s: bpf_fib_lookup() + bpf_redirect(), which never re-validates a STALE entry", lab.NodeBackendIf)
	args := []string{"agent", "--metrics.listen", metricsAddr, "--control.socket", sock, "--stale-threshold", "5s",
		"--tracer", "xmit", "--tracer.window", "1s", "--tracer.period", "1s",
		"--datapath.interfaces", lab.NodeBackendIf, "--datapath.mode", "legacy", "--remediation", "dry-run"}
	fmt.Printf("    neighwatch %s\n", strings.Join(args, " "))
	agentLog, err := os.Create(filepath.Join(dir, "agent.log"))
	if err != nil {
		return err
	}
	defer agentLog.Close()
	agent := l.Node.Command(bin, args...)
	agent.Stdout, agent.Stderr = agentLog, agentLog
	if err := agent.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- agent.Wait() }()
	defer func() {
		_ = agent.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = agent.Process.Kill()
			<-exited
		}
	}()
	if err := until(ctx, 60*time.Second, "ready agent", func() bool {
		code, _, err := l.Node.HTTPGet("http://" + metricsAddr + "/readyz/tracer")
		return err == nil && code == 200
	}); err != nil {
		return fmt.Errorf("%w; agent log in %s", err, agentLog.Name())
	}
	nw := func(args ...string) string {
		out, _ := exec.Command(bin, append(args, "--control.socket", sock)...).CombinedOutput()
		return string(out)
	}
	ping := func(n int) int {
		_, got, _ := l.Client.Echo(lab.BackendIP, n, 200*time.Millisecond, time.Second)
		return got
	}

	say("Traffic flows: the client pings the backend")
	fmt.Printf("    %d of 5 echo replies came back\n", ping(5))
	say("Waiting for the client's entry to stay STALE for 5 s (--stale-threshold) while the replies keep flowing")
	if err := until(ctx, 60*time.Second, "at-risk entry", func() bool {
		ping(2)
		return strings.Contains(grepLine(nw("status", "--interface", lab.NodeClientIf), lab.ClientIP.String()), "at-risk")
	}); err != nil {
		return err
	}
	say("neighwatch classes the entry at-risk: its replies bypass the neighbour subsystem, nothing will re-validate it")
	fmt.Print(indent(nw("status", "--interface", lab.NodeClientIf)))

	newMAC := lab.HostMAC(42, 42)
	say("The client moves to a new MAC, %s, and no ARP reaches the node (switches suppress it)", newMAC)
	if err := l.MoveClientMAC(newMAC); err != nil {
		return err
	}
	say("The black hole: the node keeps sending the replies to the old MAC")
	fmt.Printf("    %d of 5 echo replies came back\n", ping(5))
	say("The client keeps sending, from its new MAC; waiting for neighwatch's verdict")
	if err := until(ctx, 60*time.Second, "stuck entry", func() bool {
		ping(1)
		return strings.Contains(grepLine(nw("status", "--interface", lab.NodeClientIf), lab.ClientIP.String()), "stuck")
	}); err != nil {
		return err
	}
	say("neighwatch saw the client's packets arrive from the new MAC, and nothing answer at the old one: the entry is stuck")
	fmt.Print(indent(nw("status", "--interface", lab.NodeClientIf)))
	say("The alert NeighbourEntryStuck fires on this series in /metrics (its expression: neighwatch_stuck_neighbour_info == 1)")
	_, body, err := l.Node.HTTPGet("http://" + metricsAddr + "/metrics")
	if err != nil {
		return err
	}
	fmt.Print(indent(grepLine(body, `neighwatch_stuck_neighbour_info{`)))

	say("Remediation on: neighwatch remediation on")
	fmt.Print(indent(nw("remediation", "on")))
	on := time.Now()
	if err := until(ctx, 90*time.Second, "traffic back", func() bool { return ping(1) == 1 }); err != nil {
		return err
	}
	say("Traffic is back %s after remediation was switched on", time.Since(on).Round(100*time.Millisecond))
	fmt.Printf("    %d of 5 echo replies came back\n", ping(5))
	fmt.Print(indent(nw("status", "--interface", lab.NodeClientIf)))
	fmt.Print(indent(grepLine(nw("remediation", "status"), "mode")))
	if k, err := l.Node.Entry(lab.NodeClientIf, netip.Addr(lab.ClientIP)); err == nil {
		fmt.Printf("    the kernel's entry: %s %v\n", k.LLAddr, k.State)
	}
	return nil
}

func grepLine(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return "    " + strings.ReplaceAll(s, "\n", "\n    ") + "\n"
}
