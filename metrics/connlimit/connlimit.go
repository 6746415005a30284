package connlimit

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
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
	// all holds every open connection, oldest first (at most max).
	all []*conn
	// good remembers clients whose requests got an answer below 400
	// (a Prometheus server that authenticated), most recent last.
	good map[string]time.Time
	// grace is how long a new connection may take to send a complete
	// request before it is the first to go when all slots are taken.
	grace time.Duration
	now   func() time.Time
	// trustNone: no answer earns a client protection (TrustNone).
	trustNone bool
	// refusal is written to a refused connection before it is closed;
	// refusing holds a token per connection being told.
	refusal  []byte
	refusing chan struct{}
}

// Policy knobs; tests shorten them.
const (
	defaultGrace = time.Second
	goodTTL      = 15 * time.Minute
	maxGood      = 1024
)

// OnDrain sets fn to run, in its own goroutine, each time the listener
// falls to an eighth of max after all max were taken: when a flood of
// connections has gone. Set it before Accept is first called.
func (l *Listener) OnDrain(fn func()) { l.onDrain = fn }

// TrustNone makes a successful answer earn a client nothing: for a socket
// whose file mode has already decided who may connect (the control
// socket), where one process holding idle connections it was answered on
// must not lock out the rest. Set it before Accept is first called.
func (l *Listener) TrustNone() { l.trustNone = true }

// RefuseWith makes a connection refused at accept read msg (for an HTTP
// server, a whole 503 response that says why) before it is closed, instead
// of a bare end of file; see refuse for the bounds. Set it before Accept
// is first called.
func (l *Listener) RefuseWith(msg []byte) {
	l.refusal = msg
	l.refusing = make(chan struct{}, maxRefusing)
}

const (
	maxRefusing = 4
	refusalWait = time.Second
)

// client is one address's (IPv6: one /64's) open connections, oldest first.
type client struct {
	key   string
	conns []*conn
}

// Wrap bounds l to max connections in all and perAddr from one client
// (an IPv4 address, an IPv6 /64; on a Unix socket the peer process, as
// SO_PEERCRED names it on Linux, elsewhere none, and only max applies).
// When all max are taken, a new connection takes the slot of, in this
// order:
//   - the oldest connection that has not completed a request within a
//     second (stalled, or sending a body that never comes) and is not
//     being answered, whoever holds it;
//   - for a client answered with success before (a Prometheus server
//     that authenticated), the oldest connection of any other client that
//     is not being answered;
//   - the longest idle keep-alive connection of a client never answered
//     with success;
//   - the oldest connection of the client holding the most, if that is
//     more than the newcomer would then hold.
//
// A connection being answered, and a successful client's idle one, are
// never taken: a scraper never sees its connection closed while it waits.
// Serve plugs the listener into the http.Server that uses it, which is
// what lets it tell those apart; without it only the last rule applies.
func Wrap(l net.Listener, max, perAddr int) *Listener {
	perAddr = min(perAddr, max) // no client can hold more than all
	b := make([]map[*client]struct{}, perAddr+1)
	for i := range b {
		b[i] = make(map[*client]struct{})
	}
	return &Listener{Listener: l, max: max, perAddr: perAddr, clients: make(map[string]*client), byCount: b,
		good: make(map[string]time.Time), grace: defaultGrace, now: time.Now}
}

// Serve plugs the listener into srv, which must serve it: srv learns
// which connection carries each request (ConnContext), tells the listener
// when a connection turns idle (ConnState), and its handler marks the
// connection busy while it answers and its client successful when it
// answers below 400.
func (l *Listener) Serve(srv *http.Server) {
	nextState := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateIdle || st == http.StateClosed {
			if lc := ours(c); lc != nil {
				l.mu.Lock()
				if st == http.StateIdle {
					lc.served++
					lc.idleSince = l.now()
				}
				// A request read to its end and answered below 400: the
				// connection turns idle (keep-alive) or closes
				// (Connection: close); one whose body never came does
				// neither until the server gives up on it.
				if lc.answered && lc.cl != nil {
					l.markGood(lc.cl.key)
				}
				lc.answered = false
				l.mu.Unlock()
			}
		}
		if nextState != nil {
			nextState(c, st)
		}
	}
	nextCtx := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if nextCtx != nil {
			ctx = nextCtx(ctx, c)
		}
		return context.WithValue(ctx, connKey{}, c)
	}
	h := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(net.Conn)
		lc := ours(c)
		if lc == nil {
			h.ServeHTTP(w, r)
			return
		}
		l.mu.Lock()
		lc.serving = true
		l.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			l.mu.Lock()
			lc.serving = false
			// A handler that writes nothing answers 200.
			lc.answered = sw.code < 400
			l.mu.Unlock()
		}()
		h.ServeHTTP(sw, r)
	})
}

type connKey struct{}

// ours finds the listener's connection under what the server holds: the
// connection itself, or a TLS connection over it.
func ours(c net.Conn) *conn {
	switch c := c.(type) {
	case *conn:
		return c
	case *tls.Conn:
		lc, _ := c.NetConn().(*conn)
		return lc
	}
	return nil
}

// statusWriter remembers the status code a handler answered with. It
// flushes (a handler that streams asserts http.Flusher) and unwraps to
// the server's writer (http.ResponseController: write deadlines).
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// markGood remembers a successful client, bounded: the oldest is
// forgotten past maxGood, and any after goodTTL.
func (l *Listener) markGood(key string) {
	if l.trustNone {
		return
	}
	now := l.now()
	if _, ok := l.good[key]; !ok && len(l.good) >= maxGood {
		var oldest string
		var at time.Time
		for k, t := range l.good {
			if oldest == "" || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(l.good, oldest)
	}
	l.good[key] = now
}

func (l *Listener) isGood(key string, now time.Time) bool {
	t, ok := l.good[key]
	if ok && now.Sub(t) > goodTTL {
		delete(l.good, key)
		return false
	}
	return ok && key != ""
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
		if key == "" {
			key = peerKey(c)
		}
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
			if victim = l.victim(key, held); victim == nil {
				l.stats.RefusedTotal++
				break
			}
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
		l.refuse(c)
	}
}

// refuse closes a refused connection; with RefuseWith, at most
// maxRefusing at a time first read what the client sends (for up to
// refusalWait: a client whose request write fails never reads the answer)
// and are told why. The rest are closed at once: a flood costs nothing
// more than before.
func (l *Listener) refuse(c net.Conn) {
	if l.refusal == nil {
		c.Close()
		return
	}
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(refusalWait))
		// The request's head, at most 4 KiB of it; the answer does not
		// depend on it.
		buf := make([]byte, 4<<10)
		if n, _ := c.Read(buf); n == 0 {
			return
		}
		_, _ = c.Write(l.refusal)
	}()
}

// victim chooses the connection a newcomer from key (holding held) takes
// the slot of, by the rules of Wrap, or nil.
func (l *Listener) victim(key string, held int) *conn {
	now := l.now()
	good := l.isGood(key, now)
	var stalled, unknown, idle *conn
	for _, c := range l.all { // oldest first
		if c.serving || c.cl == nil {
			continue
		}
		if c.served == 0 && now.Sub(c.at) > l.grace && stalled == nil {
			stalled = c // whoever holds it: a stall is a stall
		}
		if l.isGood(c.cl.key, now) {
			continue
		}
		if c.served > 0 && (idle == nil || c.idleSince.Before(idle.idleSince)) {
			idle = c
		}
		if unknown == nil {
			unknown = c
		}
	}
	switch {
	case stalled != nil:
		return stalled
	case good && unknown != nil:
		return unknown
	case idle != nil && now.Sub(idle.idleSince) > l.grace:
		return idle
	}
	if top := l.largest(); top != nil && len(top.conns) > held+1 && !l.isGood(top.key, now) {
		for _, c := range top.conns {
			if !c.serving {
				return c
			}
		}
	}
	return nil
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
	nc := &conn{Conn: c, l: l, at: l.now()}
	l.all = append(l.all, nc)
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
	for i, x := range l.all {
		if x == c {
			l.all = append(l.all[:i], l.all[i+1:]...)
			break
		}
	}
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
	l  *Listener
	cl *client
	at time.Time // accepted
	// Guarded by l.mu.
	released  bool
	serving   bool      // a handler is answering a request on it
	served    int       // requests answered on it
	idleSince time.Time // since its last answer
	answered  bool      // the last request was answered below 400
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.remove(c)
	c.l.mu.Unlock()
	return err
}
