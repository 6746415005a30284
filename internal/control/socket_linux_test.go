package control

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/table"
)

// requireRoot fails in CI and skips elsewhere: these tests make files of
// another user (chown), as a local user would plant them.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("not root in CI: these tests chown files to another user")
		}
		t.Skip("not root: cannot make files of another user (chown)")
	}
}

// stickyDir is a /tmp-like directory: root's, mode 1777.
func stickyDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return d
}

// planted is a live socket another user (65534) left at path.
type planted struct{ ln *net.UnixListener }

func plant(t *testing.T, path string) *planted {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return &planted{ln}
}

// untouched says whether nobody connected to the planted socket: a
// connection made is queued, so Accept returns it at once; none comes in
// the second given.
func (p *planted) untouched(t *testing.T) bool {
	t.Helper()
	_ = p.ln.SetDeadline(time.Now().Add(time.Second))
	c, err := p.ln.Accept()
	if err == nil {
		c.Close()
		return false
	}
	return true
}

// TestNeverConnectsToAPlantedSocket: a live socket another user put at
// the control socket's path (in a sticky directory, where they may) is
// refused by its owner, before anything connects to it: by the agent
// (Listen) and by a client (neighwatch status). The agent used to
// connect first and then refuse with "another agent is listening".
func TestNeverConnectsToAPlantedSocket(t *testing.T) {
	requireRoot(t)
	path := filepath.Join(stickyDir(t), "neighwatch.sock")
	p := plant(t, path)
	_, err := Listen(path)
	if err == nil || !strings.Contains(err.Error(), "belongs to user 65534") {
		t.Errorf("the agent at a planted socket: %v, want refused by its owner", err)
	}
	if !p.untouched(t) {
		t.Error("the agent connected to the planted socket")
	}
	// Bounded: a client that connected would wait for an answer the
	// planted socket never gives.
	ctx, cancel := context.WithTimeout(context.Background(), lab.Patience(10*time.Second))
	defer cancel()
	_, err = NewClient(path).Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "belongs to user 65534") || !strings.Contains(err.Error(), "not connecting") {
		t.Errorf("a client at a planted socket: %v, want refused by its owner", err)
	}
	if !p.untouched(t) {
		t.Error("the client connected to the planted socket")
	}
}

// protectedSymlinks sets fs.protected_symlinks for the test, and back.
func protectedSymlinks(t *testing.T, v string) {
	t.Helper()
	const f = "/proc/sys/fs/protected_symlinks"
	old, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.WriteFile(f, old, 0o644) })
}

// TestSymlinksOnThePath, with fs.protected_symlinks 0 and 1: a symlink
// another user owns on the socket's path (in a sticky directory, where
// they may make one and later point it at a directory of theirs) is
// refused, for the agent and for a client; a symlink of root's in a
// directory of root's is followed (/var/run -> /run). The agent used to
// follow the user's link (stat, not lstat), serve, and after a swap send
// root's commands to the user's socket.
func TestSymlinksOnThePath(t *testing.T) {
	requireRoot(t)
	for _, v := range []string{"0", "1"} {
		t.Run("protected_symlinks="+v, func(t *testing.T) {
			protectedSymlinks(t, v)
			base := t.TempDir()
			real := filepath.Join(base, "real")
			if err := os.Mkdir(real, 0o755); err != nil {
				t.Fatal(err)
			}
			shared := stickyDir(t)
			theirs := filepath.Join(shared, "run")
			if err := os.Symlink(real, theirs); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(theirs, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(theirs, "neighwatch.sock")
			if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), theirs+" is a symlink of user 65534") {
				t.Errorf("the agent through another user's symlink: %v, want refused, naming it", err)
			}
			if _, err := os.Lstat(filepath.Join(real, "neighwatch.sock")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a socket was made behind the refused symlink: %v", err)
			}
			// A client through the same link, to a socket root made
			// behind it.
			ln, err := Listen(filepath.Join(real, "neighwatch.sock"))
			if err != nil {
				t.Fatal(err)
			}
			srv := NewServer(NewHandler(table.New(time.Minute, nil)))
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(srv.Stop)
			if _, err := NewClient(path).Status(context.Background()); err == nil || !strings.Contains(err.Error(), "is a symlink of user 65534") {
				t.Errorf("a client through another user's symlink: %v, want refused", err)
			}
			// Root's own link, in root's directory: followed.
			ours := filepath.Join(base, "var-run")
			if err := os.Symlink(real, ours); err != nil {
				t.Fatal(err)
			}
			if _, err := NewClient(filepath.Join(ours, "neighwatch.sock")).Status(context.Background()); err != nil {
				t.Errorf("a client through root's symlink: %v", err)
			}
		})
	}
}

// TestCloseRemovesOnlyItsSocket: the socket is removed through the
// directory it was made in, and only while it is the one made there:
// a path whose link now points elsewhere, or a socket that replaced it,
// is left alone.
func TestCloseRemovesOnlyItsSocket(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "run")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(filepath.Join(link, "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	// The link now points at b, where another socket of the same name is.
	other, err := net.Listen("unix", filepath.Join(b, "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := os.Lstat(filepath.Join(a, "c.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent's socket in a: %v, want removed", err)
	}
	if _, err := os.Lstat(filepath.Join(b, "c.sock")); err != nil {
		t.Errorf("the other socket in b: %v, want left alone", err)
	}
	// A socket that replaced the agent's at its own path is left too.
	ln2, err := Listen(filepath.Join(a, "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Unlink(filepath.Join(a, "c.sock")); err != nil {
		t.Fatal(err)
	}
	again, err := net.Listen("unix", filepath.Join(a, "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	ln2.Close()
	if _, err := os.Lstat(filepath.Join(a, "c.sock")); err != nil {
		t.Errorf("a socket that replaced the agent's: %v, want left alone", err)
	}
}
