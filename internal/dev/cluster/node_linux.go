package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say where the node runs and what it pulls from.
type Options struct {
	// Tools are nwk8s, the pause executable and the rest (Build).
	Tools Tools
	// Registry is docker-registry's executable.
	Registry string
	// NetNS is the node's network namespace, by name (ip netns): its
	// host network, where the kubelet, containerd and the control plane
	// run and hostNetwork pods find their interfaces. The caller makes
	// and deletes it (a lab's node).
	NetNS string
	// Dir is where the node keeps its state; it is removed by Close.
	Dir string
	// Subnet's first address is the host's end of the management link
	// (the registry listens there), its second the node's (the API server
	// and the kubelet), a /30. The host end is in the caller's namespace.
	Subnet netip.Prefix
	// Log gets one line per step.
	Log io.Writer
}

// Node is a running single-node cluster.
type Node struct {
	opt     Options
	id      string
	hostIP  netip.Addr
	nodeIP  netip.Addr
	hostIf  string
	holder  *exec.Cmd
	procs   []*proc
	sysctls map[string]string
	cgroups []string // the cgroup root's directory in each hierarchy
	made    []string // mount points Start made on the host
	before  HostState
	closed  bool
	mu      sync.Mutex
}

// proc is one part of the node, logging to Dir/logs/NAME.log.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// kernelTunables are the sysctls the kubelet sets on a node that does
// not protect the kernel's defaults (it sets them on every start): they
// are host-wide, so Close puts back what Start found.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func (n *Node) logf(format string, args ...any) {
	if n.opt.Log != nil {
		fmt.Fprintf(n.opt.Log, "nwk8s: "+format+"\n", args...)
	}
}

// HostIP is the host's end of the management link, where the registry
// listens; NodeIP the node's, where the API server and the kubelet do.
func (n *Node) HostIP() netip.Addr { return n.hostIP }

// NodeIP is the node's InternalIP: a hostNetwork pod's address.
func (n *Node) NodeIP() netip.Addr { return n.nodeIP }

// Registry is host:port of the registry the node pulls from.
func (n *Node) Registry() string { return net.JoinHostPort(n.hostIP.String(), "5000") }

// Server is the API server's URL.
func (n *Node) Server() string { return "https://" + net.JoinHostPort(n.nodeIP.String(), "6443") }

// Kubeconfig is the cluster admin's kubeconfig file.
func (n *Node) Kubeconfig() string { return filepath.Join(n.opt.Dir, "admin.kubeconfig") }

// PKI is the directory of the cluster's certificates (ca.crt, admin.crt...).
func (n *Node) PKI() string { return filepath.Join(n.opt.Dir, "pki") }

// Holder is the pid of the process that holds the node's mount
// namespace: /proc/PID/root is the node's file system as its pods' host
// paths see it.
func (n *Node) Holder() int { return n.holder.Process.Pid }

// Start brings the node up: the registry, etcd, the API server, the
// controller manager and the scheduler, containerd and the kubelet, in
// NetNS and in a mount namespace of the node's own (its /run and
// /var/log are its own, as a machine's are), and returns once the node
// is Ready. On error it has undone what it did.
func Start(ctx context.Context, opt Options) (n *Node, err error) {
	n = &Node{opt: opt, id: strconv.Itoa(os.Getpid())}
	n.hostIP = opt.Subnet.Masked().Addr().Next()
	n.nodeIP = n.hostIP.Next()
	n.hostIf = "nwk8s" + n.id
	if n.before, err = ReadHostState(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	for _, dir := range []string{"pki", "logs", "etcd", "containerd", "cni", "cni-ipam", "certs.d", "registry"} {
		if err = os.MkdirAll(filepath.Join(opt.Dir, dir), 0o755); err != nil {
			return n, err
		}
	}
	n.sysctls = map[string]string{}
	for _, k := range kernelTunables {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return n, err
		}
		n.sysctls[k] = strings.TrimSpace(string(b))
	}
	if err = n.link(); err != nil {
		return n, err
	}
	if err = makePKI(n.PKI(), NodeName, net.IP(n.nodeIP.AsSlice())); err != nil {
		return n, err
	}
	for _, id := range []string{"admin", "controller-manager", "scheduler", "kubelet"} {
		if err = os.WriteFile(filepath.Join(opt.Dir, id+".kubeconfig"), []byte(kubeconfig(n.PKI(), id, n.Server())), 0o600); err != nil {
			return n, err
		}
	}
	if err = n.writeConfigs(); err != nil {
		return n, err
	}
	if err = n.cgroupRoot(); err != nil {
		return n, err
	}
	if err = n.startHolder(); err != nil {
		return n, err
	}
	if err = n.startRegistry(ctx); err != nil {
		return n, err
	}
	pause, err := os.ReadFile(opt.Tools.Pause)
	if err != nil {
		return n, err
	}
	repo, tag, _ := strings.Cut(pauseTag, ":")
	if _, err = PushImage(n.Registry(), repo, tag, "pause", pause, []string{"/pause"}, "65535:65535"); err != nil {
		return n, err
	}
	if err = n.controlPlane(ctx); err != nil {
		return n, err
	}
	if err = n.startKubelet(ctx); err != nil {
		return n, err
	}
	return n, nil
}

// link makes the management link: a veth from the caller's namespace
// into the node's, the node's default route through it.
func (n *Node) link() error {
	bits := n.opt.Subnet.Bits()
	steps := [][]string{
		{"link", "add", n.hostIf, "type", "veth", "peer", "name", "k8s0", "netns", n.opt.NetNS},
		{"addr", "add", fmt.Sprintf("%s/%d", n.hostIP, bits), "dev", n.hostIf},
		{"link", "set", n.hostIf, "up"},
		{"-n", n.opt.NetNS, "addr", "add", fmt.Sprintf("%s/%d", n.nodeIP, bits), "dev", "k8s0"},
		{"-n", n.opt.NetNS, "link", "set", "k8s0", "up"},
		{"-n", n.opt.NetNS, "link", "set", "lo", "up"},
		{"-n", n.opt.NetNS, "route", "replace", "default", "via", n.hostIP.String()},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(s, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// cgroupRoot makes the cgroup the kubelet puts every pod under, in each
// cgroup v1 hierarchy, so that Close finds and removes all of them.
func (n *Node) cgroupRoot() error {
	hier, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, h := range hier {
		if fi, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil || fi.IsDir() {
			continue
		}
		dir := filepath.Join(h, "nwk8s-"+n.id)
		// The unified hierarchy of a hybrid host: runc makes the
		// container's cgroup there too; Close removes it.
		if filepath.Base(h) == "unified" {
			n.cgroups = append(n.cgroups, dir)
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		n.cgroups = append(n.cgroups, dir)
		// A new cpuset has no CPUs nor memory nodes until given its
		// parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	if len(n.cgroups) == 0 {
		return errors.New("no cgroup v1 hierarchy under /sys/fs/cgroup: the node runs the kubelet on cgroup v1 (failCgroupV1: false)")
	}
	return nil
}

// nodeDirs are where the kubelet and the controller manager keep state
// on a node, some of it at paths they are not told (the device plugins'
// directory, the flex volumes'): in the node's mount namespace each is a
// directory of Dir, mounted there.
var nodeDirs = []string{"/var/lib/kubelet", "/usr/libexec/kubernetes"}

// startHolder starts the process that holds the node's mount namespace:
// a copy of the host's, whose mounts do not reach the host, with a /run,
// a /var/log and nodeDirs of its own. Every other part enters it and
// NetNS.
func (n *Node) startHolder() error {
	script := `set -e
mount -t tmpfs -o mode=0755,size=256m nwk8s-run /run
mount -t tmpfs -o mode=0755,size=256m nwk8s-log /var/log
`
	for _, d := range nodeDirs {
		src := filepath.Join(n.opt.Dir, "root", d)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		// The mount point must exist on the host: made here if it did
		// not, removed by Close.
		if _, err := os.Stat(d); os.IsNotExist(err) {
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			n.made = append(n.made, d)
		}
		script += fmt.Sprintf("mount --bind %q %q\n", src, d)
	}
	script += "echo ready\nexec sleep infinity\n"
	cmd := exec.Command("nsenter", "--net=/run/netns/"+n.opt.NetNS, "--", "unshare", "--mount", "--propagation", "slave", "--", "sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	n.holder = cmd
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		return fmt.Errorf("the node's mount namespace: %v: %s", err, stderr.String())
	}
	return nil
}

// start runs one part in the node's namespaces.
func (n *Node) start(name string, argv ...string) (*proc, error) {
	log, err := os.Create(filepath.Join(n.opt.Dir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	full := append([]string{"--target", strconv.Itoa(n.Holder()), "--mount", "--net", "--"}, argv...)
	cmd := exec.Command("nsenter", full...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	n.logf("started %s (pid %d)", name, cmd.Process.Pid)
	return p, nil
}

// Logs returns the last lines of a part's log (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd, kubelet,
// registry).
func (n *Node) Logs(name string, lines int) string {
	b, _ := os.ReadFile(filepath.Join(n.opt.Dir, "logs", name+".log"))
	return tail(string(b), lines)
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitFor polls cond every 100 ms until it holds, the part dies, or
// limit passes.
func waitFor(ctx context.Context, limit time.Duration, what string, p *proc, cond func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if p != nil {
			select {
			case <-p.done:
				b, _ := os.ReadFile(p.log.Name())
				return fmt.Errorf("%s exited (%v) before %s; its last lines:\n%s", p.name, p.err, what, tail(string(b), 30))
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v: %w", what, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startRegistry runs Debian's docker-registry on the host's end of the
// management link, plain HTTP, for the node to pull from, as a private
// registry of the site.
func (n *Node) startRegistry(ctx context.Context) error {
	cfg := filepath.Join(n.opt.Dir, "registry.yml")
	body := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(n.opt.Dir, "registry"), n.Registry())
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(n.opt.Dir, "logs", "registry.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(n.opt.Registry, "serve", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{name: "registry", cmd: cmd, log: log, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	n.procs = append(n.procs, p)
	return waitFor(ctx, time.Minute, "the registry to answer", p, func() error {
		resp, err := http.Get("http://" + n.Registry() + "/v2/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	})
}

// adminClient is an HTTP client with the admin's certificate.
func (n *Node) adminClient() (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(filepath.Join(n.PKI(), "admin.crt"), filepath.Join(n.PKI(), "admin.key"))
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(filepath.Join(n.PKI(), "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}, nil
}

// controlPlane starts etcd, the API server, the controller manager and
// the scheduler, and waits for the API server's readiness.
func (n *Node) controlPlane(ctx context.Context) error {
	pki := n.PKI()
	// The API server waits for etcd itself.
	if _, err := n.start("etcd", n.opt.Tools.Nwk8s, "etcd", "--name", "nwk8s", "--data-dir", filepath.Join(n.opt.Dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "nwk8s=http://127.0.0.1:2380", "--listen-metrics-urls", "",
		// A test node: losing the last writes to a crash costs nothing,
		// and fsync on a loaded disk slows every write.
		"--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}
	api, err := n.start("kube-apiserver", n.opt.Tools.Nwk8s, "kube-apiserver",
		"--etcd-servers", "http://127.0.0.1:2379",
		"--advertise-address", n.nodeIP.String(), "--bind-address", "0.0.0.0", "--secure-port", "6443",
		"--tls-cert-file", filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file", filepath.Join(pki, "apiserver.key"),
		"--client-ca-file", filepath.Join(pki, "ca.crt"),
		"--kubelet-client-certificate", filepath.Join(pki, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key", filepath.Join(pki, "apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", filepath.Join(pki, "ca.crt"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range", serviceRange,
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--allow-privileged=true", "--profiling=false", "--v=1")
	if err != nil {
		return err
	}
	client, err := n.adminClient()
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 3*time.Minute, "the API server to be ready", api, func() error {
		resp, err := client.Get(n.Server() + "/readyz")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
		}
		return nil
	}); err != nil {
		return err
	}
	n.logf("the API server is ready at %s", n.Server())
	if _, err := n.start("kube-controller-manager", n.opt.Tools.Nwk8s, "kube-controller-manager",
		"--kubeconfig", filepath.Join(n.opt.Dir, "controller-manager.kubeconfig"),
		"--authentication-kubeconfig", filepath.Join(n.opt.Dir, "controller-manager.kubeconfig"),
		"--authorization-kubeconfig", filepath.Join(n.opt.Dir, "controller-manager.kubeconfig"),
		"--service-account-private-key-file", filepath.Join(pki, "sa.key"),
		"--root-ca-file", filepath.Join(pki, "ca.crt"),
		"--cluster-signing-cert-file", filepath.Join(pki, "ca.crt"), "--cluster-signing-key-file", filepath.Join(pki, "ca.key"),
		"--use-service-account-credentials=true", "--controllers", "*",
		"--service-cluster-ip-range", serviceRange, "--cluster-cidr", podRange, "--allocate-node-cidrs=true", "--node-cidr-mask-size", "24",
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "10257", "--profiling=false", "--v=1"); err != nil {
		return err
	}
	_, err = n.start("kube-scheduler", n.opt.Tools.Nwk8s, "kube-scheduler",
		"--kubeconfig", filepath.Join(n.opt.Dir, "scheduler.kubeconfig"),
		"--authentication-kubeconfig", filepath.Join(n.opt.Dir, "scheduler.kubeconfig"),
		"--authorization-kubeconfig", filepath.Join(n.opt.Dir, "scheduler.kubeconfig"),
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "10259", "--profiling=false", "--v=1")
	return err
}

// writeConfigs writes containerd's configuration, the CNI network and
// the kubelet's configuration.
func (n *Node) writeConfigs() error {
	d := n.opt.Dir
	reg := n.Registry()
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(`version = 2
root = "%[1]s/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s/%[3]s"
  # This machine refuses an oom_score_adj below the caller's; runc then
  # fails with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "%[1]s/certs.d"
`, d, reg, pauseTag),
		"certs.d/" + reg + "/hosts.toml": fmt.Sprintf("server = \"http://%[1]s\"\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", reg),
		// A bridge for pods of their own network (none of the tests'
		// are): the node is Ready only with a pod network.
		"cni/10-nwk8s.conflist": fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "nwk8s", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "%s"}]], "dataDir": "%s/cni-ipam"}},
  {"type": "loopback"}]}
`, podRange, d),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[1]s/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: %[1]s/pki/kubelet-serving.crt
tlsPrivateKeyFile: %[1]s/pki/kubelet-serving.key
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /nwk8s-%[2]s
# This machine has cgroup v1, which 1.35 refuses by default.
failCgroupV1: false
failSwapOn: false
# The kubelet's defaults on a node that does not protect the kernel's:
# it sets them (Close puts the host's back).
protectKernelDefaults: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
# The tests' disk may be fuller than a node's: evict only when it is full.
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, nodefs.inodesFree: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
resolvConf: /etc/resolv.conf
`, d, n.id),
	}
	for name, body := range files {
		p := filepath.Join(d, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startKubelet starts containerd and the kubelet and waits for the node
// to be Ready.
func (n *Node) startKubelet(ctx context.Context) error {
	ctrd, err := n.start("containerd", "containerd", "--config", filepath.Join(n.opt.Dir, "containerd.toml"))
	if err != nil {
		return err
	}
	sock := filepath.Join("/proc", strconv.Itoa(n.Holder()), "root", "run", "containerd", "containerd.sock")
	if err := waitFor(ctx, time.Minute, "containerd's socket", ctrd, func() error { _, err := os.Stat(sock); return err }); err != nil {
		return err
	}
	kubelet, err := n.start("kubelet", n.opt.Tools.Nwk8s, "kubelet",
		"--config", filepath.Join(n.opt.Dir, "kubelet.yaml"),
		"--kubeconfig", filepath.Join(n.opt.Dir, "kubelet.kubeconfig"),
		"--hostname-override", NodeName, "--node-ip", n.nodeIP.String(), "--v=1")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, 3*time.Minute, "the node to be Ready", kubelet, func() error {
		out, err := n.Kubectl(ctx, nil, "get", "node", NodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return err
		}
		if string(out) != "True" {
			return fmt.Errorf("the node's Ready condition is %q", out)
		}
		return nil
	}); err != nil {
		return err
	}
	n.logf("node %s is Ready", NodeName)
	return nil
}

// Kubectl runs nwk8s kubectl as the cluster's admin, stdin from in, and
// returns its standard output; an error carries its standard error.
func (n *Node) Kubectl(ctx context.Context, in []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, n.opt.Tools.Nwk8s, append([]string{"kubectl", "--kubeconfig", n.Kubeconfig()}, args...)...)
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// Close stops every part, kills what the node ran (pods, shims), removes
// the cgroups, the link and Dir, and puts the kernel tunables back; then
// it checks the host is as Start found it.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	procs := n.procs
	n.mu.Unlock()
	var errs []error
	byName := map[string]*proc{}
	for _, p := range procs {
		byName[p.name] = p
	}
	// The kubelet first, so it starts nothing more; then every process
	// in the pods' cgroups.
	stop(byName["kubelet"], 30*time.Second)
	errs = append(errs, n.killCgroups())
	for _, name := range []string{"containerd", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "registry"} {
		stop(byName[name], 30*time.Second)
	}
	// What is left in the node's mount namespace (containerd's shims
	// outlive it), and the holder last.
	if n.holder != nil {
		errs = append(errs, killNamespace(n.Holder()))
		_ = n.holder.Process.Kill()
		_ = n.holder.Wait()
	}
	for _, p := range procs {
		p.log.Close()
	}
	errs = append(errs, n.removeCgroups())
	for _, d := range n.made {
		if err := os.Remove(d); err != nil {
			errs = append(errs, fmt.Errorf("the mount point %s the node made: %w", d, err))
		}
	}
	for k, v := range n.sysctls {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("put back %s=%s: %w", k, v, err))
		}
	}
	if n.hostIf != "" {
		_ = exec.Command("ip", "link", "del", n.hostIf).Run()
	}
	if n.opt.Dir != "" {
		if err := os.RemoveAll(n.opt.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	if n.before.Mounts != nil {
		// The kubelet mounts a pod's secret and projected volumes with
		// mount(8), whose libmount makes its lock directory, /run/mount,
		// in the host's /run the first time anything on the machine
		// mounts that way, and leaves it empty. On a machine that had
		// none, it goes again.
		if !slices.Contains(n.before.Entries, libmountDir) {
			_ = os.Remove(libmountDir) // only when empty
		}
		after, err := ReadHostState()
		if err != nil {
			errs = append(errs, err)
		} else if d := n.before.Diff(after); d != "" {
			errs = append(errs, fmt.Errorf("the host is not as the node found it:\n%s", d))
		}
	}
	return errors.Join(errs...)
}

// stop sends a part SIGTERM and, if it has not exited within grace,
// SIGKILL.
func stop(p *proc, grace time.Duration) {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// killCgroups kills every process under the cgroup root, until none is
// left.
func (n *Node) killCgroups() error {
	deadline := time.Now().Add(time.Minute)
	for {
		pids := map[int]bool{}
		for _, root := range n.cgroups {
			_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids[pid] = true
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes left in the pods' cgroups: %v", pids)
		}
		for pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killNamespace kills every process but holder whose mount namespace is
// holder's, until none is left.
func killNamespace(holder int) error {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		left := processesIn("mnt", ns, holder)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes left in the node's mount namespace: %v", left)
		}
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesIn lists the processes, but except, whose namespace of kind
// (mnt, net) is ns (its /proc/PID/ns/KIND link).
func processesIn(kind, ns string, except int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except || zombie(pid) {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind)); err == nil && l == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie reports whether pid has exited and waits for its parent (or
// is gone).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// removeCgroups removes the cgroup root in every hierarchy, children
// first.
func (n *Node) removeCgroups() error {
	var errs []error
	for _, root := range n.cgroups {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
