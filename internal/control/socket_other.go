//go:build !linux

package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// dialSocket connects to the control socket at path. Only Linux runs
// the agent; elsewhere the client dials the path as it is.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// Listen creates the control socket at path, mode 0600 from the first
// moment anyone can reach it: it is bound inside a fresh directory only
// this user can enter, restricted, and only then renamed into place, so no
// umask and no race lets another user connect. It replaces a stale socket
// left by a previous run but refuses to replace anything else, or a socket
// another agent serves.
func Listen(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("empty control socket path")
	}
	// The agent could serve a longer path (it binds a short one and
	// renames it), but no client could connect to it.
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("control socket path %s is %d bytes, longer than the %d a Unix socket address holds; choose a shorter path", path, len(path), maxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create directory for control socket %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket path %s exists and is not a socket; remove it or choose another path", path)
		}
		if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("another agent is listening on %s; stop it or choose another path", path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("control socket path %s: %w", path, err)
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp(dir, ".neighwatch-")
	if err != nil {
		return nil, fmt.Errorf("create a private directory for the control socket in %s: %w", dir, err)
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "sock")
	l, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false) // it will have moved; the agent removes path itself
	if err := os.Chmod(tmp, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict control socket %s to mode 0600: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		l.Close()
		return nil, fmt.Errorf("put control socket in place at %s: %w", path, err)
	}
	return l, nil
}

// checkSocketDir refuses a socket directory that another user could
// rename the socket out of, and bind their own in its place to receive
// the operator's commands: the directory and each one above it must
// belong to root or the agent's user, and be writable by no one else
// unless it is sticky (as /tmp is: there nobody may rename what is not
// theirs).
func checkSocketDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	me := uint32(os.Geteuid())
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("control socket directory %s: %w", d, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil // no owners to check on this system
		}
		if st.Uid != 0 && st.Uid != me {
			return fmt.Errorf("control socket directory %s belongs to user %d, who could take the socket: choose a path in a directory of root's or the agent's user", d, st.Uid)
		}
		if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0 {
			return fmt.Errorf("control socket directory %s is writable by other users (mode %s), who could take the socket: remove their write permission or choose another path", d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
