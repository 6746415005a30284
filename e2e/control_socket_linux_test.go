package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary run watchHelper instead of the tests.
const helperEnv = "NEIGHWATCH_TEST_HELPER"

// watchReport is what watchHelper saw.
type watchReport struct {
	Events, Attempts, Connected int
	Modes                       []string // modes other than a 0600 socket seen at the path
}

// watchHelper runs as an unprivileged user. It watches a directory with
// inotify and, on every event, tries to connect to the socket path and to
// whatever the event names (a socket, or a socket inside a directory that
// appeared). It prints "ready" once watching, and its report when its
// standard input closes.
func watchHelper() {
	dir, path := os.Getenv("WATCH_DIR"), os.Getenv("WATCH_PATH")
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		fmt.Println("inotify:", err)
		os.Exit(1)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ATTRIB|unix.IN_CLOSE_WRITE); err != nil {
		fmt.Println("inotify watch:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var rep watchReport
	try := func(p string) {
		rep.Attempts++
		if c, err := net.Dial("unix", p); err == nil {
			rep.Connected++
			c.Close()
		}
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		mu.Lock()
		_ = json.NewEncoder(os.Stdout).Encode(rep)
		os.Exit(0)
	}()
	fmt.Println("ready")
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			continue
		}
		mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			rep.Events++
			// The mode first: it is the quicker look.
			if fi, err := os.Lstat(path); err == nil && (fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600) {
				rep.Modes = append(rep.Modes, fi.Mode().String())
			}
			try(path)
			if name != "" {
				try(filepath.Join(dir, name))
				try(filepath.Join(dir, name, "sock"))
			}
		}
		mu.Unlock()
	}
}

// startWatcher runs watchHelper as nobody on dir and path; the returned
// function ends it and returns its report.
func startWatcher(t *testing.T, dir, path string) func() watchReport {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy nobody can run: the test binary's own directory is private.
	exe := filepath.Join(filepath.Dir(binPath), "watch-helper-"+filepath.Base(dir))
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(exe) })
	var (
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout io.ReadCloser
	)
	// A process another test forks while the copy is being written
	// holds its descriptor open for writing until it execs, and the
	// kernel refuses to run a file open for writing (ETXTBSY, Go issue
	// 22315): try again once that child has moved on.
	for try := 0; ; try++ {
		cmd = exec.Command(exe)
		cmd.Env = append(os.Environ(), helperEnv+"=watch", "WATCH_DIR="+dir, "WATCH_PATH="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if stdout, err = cmd.StdoutPipe(); err != nil {
			t.Fatal(err)
		}
		err = cmd.Start()
		if err == nil {
			break
		}
		stdin.Close()
		stdout.Close()
		if !errors.Is(err, syscall.ETXTBSY) || try == 100 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("watcher did not start: %q %v", line, err)
	}
	var once sync.Once
	var rep watchReport
	end := func() watchReport {
		once.Do(func() {
			stdin.Close()
			if err := json.NewDecoder(r).Decode(&rep); err != nil {
				t.Errorf("watcher report: %v", err)
			}
			_ = cmd.Wait()
		})
		return rep
	}
	t.Cleanup(func() { end() })
	return end
}

// publicDir is a fresh directory every user can enter and read.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nwsock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestControlSocketNeverOpen: an unprivileged process that watches the
// socket's directory with inotify and connects on every event never gets
// in, over 50 agent starts under umask 000; the same watcher does get in
// to a socket made the naive way (listen, then chmod), so it can tell.
func TestControlSocketNeverOpen(t *testing.T) {
	lab.Require(t)
	t.Parallel()

	// The watcher can tell: a socket bound under umask 000 is open to
	// everyone from bind until chmod. Here it stays open until the
	// watcher has connected once.
	naive := publicDir(t)
	end := startWatcher(t, naive, filepath.Join(naive, "c.sock"))
	old := syscall.Umask(0)
	ln, err := net.Listen("unix", filepath.Join(naive, "c.sock"))
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	in := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case in <- struct{}{}:
			default:
			}
		}
	}()
	// bind announces the socket before listen makes it connectable, so
	// the watcher's first try may be refused: further events in the
	// directory give it more chances, as a polling attacker would have.
	poke := filepath.Join(naive, "poke")
	deadline := time.After(lab.Patience(30 * time.Second))
wait:
	for {
		select {
		case <-in:
			break wait
		case <-deadline:
			t.Fatal("the watcher never connected to a socket bound under umask 000: it cannot tell")
		case <-time.After(20 * time.Millisecond):
			if err := os.WriteFile(poke, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.Remove(poke)
	if err := os.Chmod(filepath.Join(naive, "c.sock"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if rep := end(); rep.Connected == 0 {
		t.Fatalf("watcher report %+v, want at least one connection to the naive socket", rep)
	}

	l := lab.New(t, "sck")
	dir := publicDir(t)
	sock := filepath.Join(dir, "control.sock")
	end = startWatcher(t, dir, sock)
	const restarts = 50
	for i := range restarts {
		cmd := exec.Command("sh", "-c", `umask 000; exec "$0" "$@"`, "ip", "netns", "exec", l.Node.Name, binPath, "agent",
			"--control.socket", sock, "--metrics.listen", "127.0.0.1:0", "--tracer", "off")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lab.WaitFor(t, 30*time.Second, "the agent to answer on its control socket", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := control.NewClient(sock).Status(ctx)
			return err == nil
		})
		if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("start %d: control socket %v %v, want mode 0600", i, fi.Mode(), err)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("start %d: agent exit: %v\n%s", i, err, out.String())
		}
	}
	rep := end()
	t.Logf("%d starts under umask 000: watcher saw %d events, tried %d connections, got %d; other modes seen: %v",
		restarts, rep.Events, rep.Attempts, rep.Connected, rep.Modes)
	if rep.Connected != 0 || len(rep.Modes) != 0 {
		t.Errorf("an unprivileged process got into the control socket %d times, saw modes %v", rep.Connected, rep.Modes)
	}
	if rep.Events < restarts {
		t.Errorf("the watcher saw %d events over %d starts: it did not watch", rep.Events, restarts)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the socket's directory after the agents stopped: %v", ents)
	}
}

// TestControlSocketUnusable: every path the control socket cannot be made
// at makes the agent exit non-zero with one line naming the path and what
// to do.
func TestControlSocketUnusable(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "sku")
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// A full filesystem: a tmpfs with room for two inodes, one of them
	// its root and the other taken.
	full := filepath.Join(dir, "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", full, "tmpfs", 0, "nr_inodes=2,size=64k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(full, unix.MNT_DETACH) })
	for i := 0; ; i++ {
		if err := os.WriteFile(filepath.Join(full, fmt.Sprint(i)), nil, 0o600); err != nil {
			break
		}
	}
	// A socket another agent serves.
	served := filepath.Join(dir, "served.sock")
	startAgent(t, l.Node, served)
	for _, tc := range []struct{ name, path, want string }{
		{"a directory", dir, "is not a socket"},
		{"a regular file", file, "is not a socket"},
		{"too long", filepath.Join(dir, strings.Repeat("x", 120)), "choose a shorter path"},
		{"a full filesystem", filepath.Join(full, "c.sock"), "no space left on device"},
		{"served by another agent", served, "another agent is listening"},
		{"under a file", filepath.Join(file, "c.sock"), "not a directory"},
	} {
		cmd := l.Node.Command(binPath, "agent", "--control.socket", tc.path, "--metrics.listen", "127.0.0.1:0", "--tracer", "off", "--log.level", "error")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(lab.Patience(30 * time.Second)):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s: the agent ran on with --control.socket %s", tc.name, tc.path)
			continue
		}
		msg := strings.TrimSpace(stderr.String())
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		// The control package says what is wrong; the agent names the
		// option.
		if code == 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "--control.socket: ") {
			t.Errorf("%s: exit %d, stderr %q; want non-zero and one line naming --control.socket and mentioning %q", tc.name, code, msg, tc.want)
		}
	}
}
