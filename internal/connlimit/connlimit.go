package connlimit

import (
	"net"
	"net/netip"
	"sync"
)

// Listener wraps a listener with the bounds.
type Listener struct {
	net.Listener
	max, perAddr int

	mu      sync.Mutex
	open    int
	clients map[string]*client
	// byCount[n] holds the clients with n connections open (1..perAddr),
	// so the largest holder is found in at most perAddr steps.
	byCount []map[*client]struct{}
	stats   Stats
	full    bool   // all max were taken since the last drain
	onDrain func() // see OnDrain
}

// OnDrain sets fn to run, in its own goroutine, each time the listener
// falls to an eighth of max after all max were taken: when a flood of
// connections has gone. Set it before Accept is first called.
func (l *Listener) OnDrain(fn func()) { l.onDrain = fn }

// client is one address's (IPv6: one /64's) open connections, oldest first.
type client struct {
	key   string
	conns []*conn
}

// Wrap bounds l to max connections in all and perAddr from one client
// (an IPv4 address, an IPv6 /64; Unix sockets have none, so only max
// applies). When all max are taken, a connection from a client holding
// fewer than the largest holder takes the oldest of that holder's: a
// client that fills the listener from many addresses cannot lock out one
// that opens a connection now and then, as a Prometheus server does.
func Wrap(l net.Listener, max, perAddr int) *Listener {
	perAddr = min(perAddr, max) // no client can hold more than all
	b := make([]map[*client]struct{}, perAddr+1)
	for i := range b {
		b[i] = make(map[*client]struct{})
	}
	return &Listener{Listener: l, max: max, perAddr: perAddr, clients: make(map[string]*client), byCount: b}
}

// Stats are a listener's counts at one moment.
type Stats struct {
	Open int
	// Connections closed at accept: over max (and no larger holder to
	// take from), over perAddr.
	RefusedTotal, RefusedAddr uint64
	// Connections closed to make room for a client holding fewer.
	Evicted uint64
}

// Stats returns the open connections and how many were refused.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.Open = l.open
	return s
}

// clientKey is the unit the per-client bound counts: an IPv4 address, or
// the /64 of an IPv6 one (one host can use a whole /64).
func clientKey(a net.Addr) string {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	ip, ok := netip.AddrFromSlice(t.IP)
	if !ok {
		return ""
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// Accept returns the next connection within the bounds; connections past
// them are closed and counted.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(c.RemoteAddr())
		l.mu.Lock()
		cl := l.clients[key]
		held := 0
		if cl != nil {
			held = len(cl.conns)
		}
		var victim *conn
		switch {
		case key != "" && held >= l.perAddr:
			l.stats.RefusedAddr++
		case l.open >= l.max && key != "":
			top := l.largest()
			if top == nil || len(top.conns) <= held+1 {
				l.stats.RefusedTotal++
				break
			}
			victim = top.conns[0]
			l.remove(victim)
			l.stats.Evicted++
			fallthrough
		case l.open < l.max:
			nc := l.add(c, key)
			l.mu.Unlock()
			if victim != nil {
				victim.Conn.Close()
			}
			return nc, nil
		default:
			l.stats.RefusedTotal++
		}
		l.mu.Unlock()
		c.Close()
	}
}

// largest returns a client holding the most connections.
func (l *Listener) largest() *client {
	for n := l.perAddr; n > 0; n-- {
		for cl := range l.byCount[n] {
			return cl
		}
	}
	return nil
}

func (l *Listener) setCount(cl *client, from int) {
	if from > 0 {
		delete(l.byCount[from], cl)
	}
	if n := len(cl.conns); n > 0 {
		l.byCount[n][cl] = struct{}{}
	} else {
		delete(l.clients, cl.key)
	}
}

func (l *Listener) add(c net.Conn, key string) *conn {
	l.open++
	if l.open >= l.max {
		l.full = true
	}
	nc := &conn{Conn: c, l: l}
	if key == "" {
		return nc
	}
	cl := l.clients[key]
	if cl == nil {
		cl = &client{key: key}
		l.clients[key] = cl
	}
	nc.cl = cl
	cl.conns = append(cl.conns, nc)
	l.setCount(cl, len(cl.conns)-1)
	return nc
}

// remove releases c's slot, once: an evicted connection is closed again
// by its server.
func (l *Listener) remove(c *conn) {
	if c.released {
		return
	}
	c.released = true
	l.open--
	if l.full && l.open <= l.max/8 {
		l.full = false
		if l.onDrain != nil {
			go l.onDrain()
		}
	}
	if cl := c.cl; cl != nil {
		for i, x := range cl.conns {
			if x == c {
				cl.conns = append(cl.conns[:i], cl.conns[i+1:]...)
				break
			}
		}
		l.setCount(cl, len(cl.conns)+1)
	}
}

type conn struct {
	net.Conn
	l        *Listener
	cl       *client
	released bool // guarded by l.mu
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.remove(c)
	c.l.mu.Unlock()
	return err
}
