package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The control socket's path is where a local user might plant what root
// then trusts: a live socket of theirs, a symlink they can swap, a
// directory they can rename entries in. Before the agent or a client
// touches anything there, the path's directory is walked from / one
// component at a time with O_PATH|O_NOFOLLOW, each checked by its
// descriptor (fstat: no swap between check and use), a symlink followed
// only when it is root's or the user's own, and the directory is held
// open; the socket is then reached through that descriptor
// (/proc/self/fd/N/name, *at calls), so a swap after the check changes
// nothing.

// maxSymlinks bounds the symlinks one walk follows (the kernel's own
// bound, ELOOP).
const maxSymlinks = 40

// socketDir is a checked directory, held open (O_PATH).
type socketDir struct {
	fd   int
	path string // as given, for messages
}

func (d *socketDir) close() { unix.Close(d.fd) }

// at names entry name of the directory through its descriptor, as a path
// the kernel resolves to the directory held, whatever became of path.
func (d *socketDir) at(name string) string {
	return "/proc/self/fd/" + strconv.Itoa(d.fd) + "/" + name
}

// trusted says what is wrong with a directory for holding the control
// socket: it must be root's or this user's, and writable by no one else
// unless it is sticky (as /tmp is: there nobody may rename or remove
// what is not theirs).
func trusted(st *unix.Stat_t, me uint32) error {
	if st.Uid != 0 && st.Uid != me {
		return fmt.Errorf("belongs to user %d, who could take the socket: choose a path in a directory of root's or the agent's user", st.Uid)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("is writable by other users (mode %s), who could take the socket: remove their write permission or choose another path", os.FileMode(st.Mode&0o777))
	}
	return nil
}

// openSocketDir walks dir from / and returns it held open, or says
// which component is wrong and why. With create, a missing directory is
// made (mode 0755) in its checked parent.
func openSocketDir(dir string, create bool) (_ *socketDir, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	w := &dirWalk{dir: dir, me: uint32(os.Geteuid()), fd: -1}
	defer func() {
		if err != nil {
			unix.Close(w.fd)
		}
	}()
	if err := w.root(); err != nil {
		return nil, err
	}
	rest := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		more, err := w.step(name, create)
		if err != nil {
			return nil, err
		}
		rest = append(more, rest...)
	}
	return &socketDir{fd: w.fd, path: dir}, nil
}

// dirWalk is a walk down a control socket's directory, one trusted
// directory after another, each held by descriptor: a swap of a
// component after its check changes nothing reached through it.
type dirWalk struct {
	dir   string // as asked, for the messages
	me    uint32 // the agent's user
	fd    int    // the directory reached so far (-1 before /)
	where string // its path
	links int    // symlinks followed
}

// root starts the walk (again) at /.
func (w *dirWalk) root() error {
	unix.Close(w.fd)
	nfd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		w.fd = -1
		return fmt.Errorf("control socket directory %s: open /: %w", w.dir, err)
	}
	return w.enter(nfd, "/")
}

// enter makes the directory at nfd (named where) the walk's, once it is
// trusted.
func (w *dirWalk) enter(nfd int, where string) error {
	w.fd, w.where = nfd, where
	var st unix.Stat_t
	if err := unix.Fstat(w.fd, &st); err != nil {
		return fmt.Errorf("control socket directory %s: %w", where, err)
	}
	if err := trusted(&st, w.me); err != nil {
		return fmt.Errorf("control socket directory %s %w", where, err)
	}
	return nil
}

// step goes down to the walk's entry name, and returns the components a
// symlink there leads to, to walk before the rest.
func (w *dirWalk) step(name string, create bool) ([]string, error) {
	next := filepath.Join(w.where, name)
	var st unix.Stat_t
	err := unix.Fstatat(w.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) && create && name != ".." {
		if err = unix.Mkdirat(w.fd, name, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
			err = unix.Fstatat(w.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("control socket directory %s: %s: %w", w.dir, next, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return w.symlink(name, next, &st)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, fmt.Errorf("control socket directory %s: %s is not a directory", w.dir, next)
	}
	nfd, err := unix.Openat(w.fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	unix.Close(w.fd)
	w.fd = nfd
	if err != nil {
		return nil, fmt.Errorf("control socket directory %s: open %s: %w", w.dir, next, err)
	}
	if name == ".." {
		next = filepath.Dir(w.where)
	}
	return nil, w.enter(nfd, next)
}

// symlink returns the components the symlink name (at next) leads to,
// restarting the walk at / for an absolute one. A symlink in a directory
// already checked could only have been put there by root, the user or
// the link's owner, so it is followed only if it is root's or the
// user's.
func (w *dirWalk) symlink(name, next string, st *unix.Stat_t) ([]string, error) {
	if st.Uid != 0 && st.Uid != w.me {
		return nil, fmt.Errorf("control socket directory %s: %s is a symlink of user %d, who could point it elsewhere after the check: use the path it points to, or a symlink of root's", w.dir, next, st.Uid)
	}
	if w.links++; w.links > maxSymlinks {
		return nil, fmt.Errorf("control socket directory %s: more than %d symlinks", w.dir, maxSymlinks)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(w.fd, name, buf)
	if err != nil {
		return nil, fmt.Errorf("control socket directory %s: read symlink %s: %w", w.dir, next, err)
	}
	target := string(buf[:n])
	if strings.HasPrefix(target, "/") {
		if err := w.root(); err != nil {
			return nil, err
		}
	}
	return strings.Split(strings.Trim(target, "/"), "/"), nil
}

// socketOwner checks the entry name of d: a socket, root's or the
// user's.
func socketOwner(d *socketDir, name, path string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: %w", path, os.ErrNotExist)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("control socket path %s exists and is not a socket; remove it or choose another path", path)
	}
	if me := uint32(os.Geteuid()); st.Uid != 0 && st.Uid != me {
		return fmt.Errorf("control socket %s belongs to user %d, not root nor this user: someone else put it there; not connecting to it (remove it, or choose another path)", path, st.Uid)
	}
	return nil
}

// dialSocket connects to the control socket at path after the checks
// above: its directories trusted, the socket root's or this user's.
func dialSocket(ctx context.Context, path string) (net.Conn, error) {
	d, err := openSocketDir(filepath.Dir(path), false)
	if err != nil {
		return nil, err
	}
	defer d.close()
	name := filepath.Base(path)
	if err := socketOwner(d, name, path); err != nil {
		return nil, err
	}
	var dialer net.Dialer
	return dialer.DialContext(ctx, "unix", d.at(name))
}

// Listen creates the control socket at path, mode 0600 from the first
// moment anyone can reach it: it is bound inside a fresh directory only
// this user can enter, restricted, and only then renamed into place, so no
// umask and no race lets another user connect. Everything happens
// through the checked directory's descriptor (openSocketDir). It replaces
// a stale socket left by a previous run, refuses to replace anything
// else, never connects to a socket that is not root's or the agent's
// user's, and refuses a live one another agent serves. Closing the
// listener removes the socket, if it is still the one it created.
func Listen(path string) (net.Listener, error) {
	if path == "" {
		return nil, errors.New("empty control socket path")
	}
	// The agent binds through /proc/self/fd, but a client that names the
	// path (curl, socat) could not connect to a longer one.
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("control socket path %s is %d bytes, longer than the %d a Unix socket address holds; choose a shorter path", path, len(path), maxSocketPath)
	}
	d, err := openSocketDir(filepath.Dir(path), true)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(path)
	switch err := socketOwner(d, name, path); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		d.close()
		return nil, err
	default:
		if c, err := net.DialTimeout("unix", d.at(name), 200*time.Millisecond); err == nil {
			c.Close()
			d.close()
			return nil, fmt.Errorf("another agent is listening on %s; stop it or choose another path", path)
		}
	}
	l, ino, err := bindAt(d, name, path)
	if err != nil {
		d.close()
		return nil, err
	}
	return &listener{Listener: l, dir: d, name: name, ino: ino}, nil
}

// bindAt binds the socket as name in d: in a private directory first,
// mode 0600, then renamed into place. It returns its inode.
func bindAt(d *socketDir, name, path string) (net.Listener, uint64, error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	private := ".neighwatch-" + hex.EncodeToString(rnd[:])
	if err := unix.Mkdirat(d.fd, private, 0o700); err != nil {
		return nil, 0, fmt.Errorf("create a private directory for the control socket beside %s: %w", path, err)
	}
	defer unix.Unlinkat(d.fd, private, unix.AT_REMOVEDIR)
	tmp := private + "/sock"
	l, err := net.Listen("unix", d.at(tmp))
	if err != nil {
		return nil, 0, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false) // it will have moved: Close removes it by name
	fail := func(what string, err error) (net.Listener, uint64, error) {
		l.Close()
		_ = unix.Unlinkat(d.fd, tmp, 0)
		return nil, 0, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if err := unix.Fchmodat(d.fd, tmp, 0o600, 0); err != nil {
		return fail("restrict to mode 0600 the control socket", err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail("stat the control socket", err)
	}
	if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
		return fail("put in place the control socket", err)
	}
	return l, st.Ino, nil
}

// listener removes its socket on Close, through the held directory, and
// only while the name is still that socket.
type listener struct {
	net.Listener
	dir   *socketDir
	name  string
	ino   uint64
	once  sync.Once
	close error
}

func (l *listener) Close() error {
	l.once.Do(func() {
		l.close = l.Listener.Close()
		var st unix.Stat_t
		if unix.Fstatat(l.dir.fd, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Ino == l.ino && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			_ = unix.Unlinkat(l.dir.fd, l.name, 0)
		}
		l.dir.close()
	})
	return l.close
}
