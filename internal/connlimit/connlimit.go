package connlimit

import (
	"net"
	"sync"
	"sync/atomic"
)

// Listener wraps a listener with the bounds.
type Listener struct {
	net.Listener
	max, perAddr int

	mu     sync.Mutex
	open   int
	byAddr map[string]int

	refusedTotal, refusedAddr atomic.Uint64
}

// Wrap bounds l to max connections in all and perAddr from one client
// address (IP for TCP; Unix sockets have none, so only max applies).
func Wrap(l net.Listener, max, perAddr int) *Listener {
	return &Listener{Listener: l, max: max, perAddr: perAddr, byAddr: make(map[string]int)}
}

// Stats are a listener's counts at one moment.
type Stats struct {
	Open                      int
	RefusedTotal, RefusedAddr uint64 // connections closed at accept: over max, over perAddr
}

// Stats returns the open connections and how many were refused.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Open: l.open, RefusedTotal: l.refusedTotal.Load(), RefusedAddr: l.refusedAddr.Load()}
}

func clientAddr(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return ""
}

// Accept returns the next connection within the bounds; connections past
// them are closed and counted.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c.RemoteAddr())
		l.mu.Lock()
		switch {
		case l.open >= l.max:
			l.refusedTotal.Add(1)
		case addr != "" && l.byAddr[addr] >= l.perAddr:
			l.refusedAddr.Add(1)
		default:
			l.open++
			if addr != "" {
				l.byAddr[addr]++
			}
			l.mu.Unlock()
			return &conn{Conn: c, l: l, addr: addr}, nil
		}
		l.mu.Unlock()
		c.Close()
	}
}

func (l *Listener) release(addr string) {
	l.mu.Lock()
	l.open--
	if addr != "" {
		if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
			delete(l.byAddr, addr)
		}
	}
	l.mu.Unlock()
}

type conn struct {
	net.Conn
	l    *Listener
	addr string
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.addr) })
	return err
}
