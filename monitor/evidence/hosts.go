package evidence

import "github.com/neighwatch/neighwatch/table"

// host is what was seen of one IP on one interface: the MAC it last
// answered from, and the one before it.
type host struct {
	mac     string
	at      int64 // last seen at mac
	prev    string
	changed int64 // when mac replaced prev

	key          table.Key
	newer, older *host // in the recency list
}

// Verdict is what one observation says about its host.
type Verdict uint8

// Verdicts.
const (
	Same     Verdict = iota // the MAC it was last seen at, or the first sighting
	Move                    // a new MAC: the host moved (one change is a move, not a duplicate)
	Conflict                // back to the MAC it left within the window: two MACs answering in turn
)

func (v Verdict) String() string {
	switch v {
	case Move:
		return "move"
	case Conflict:
		return "conflict"
	}
	return "same"
}

// observe applies one sighting of mac at now to h. Two MACs that answer in
// turn within window (A, B, A: arpwatch's "flip flop"), or both keep
// answering, are a conflict; a single change is a move.
func (h *host) observe(mac string, now, window int64) Verdict {
	switch {
	case h.mac == "" || mac == h.mac:
		h.mac, h.at = mac, now
		return Same
	case mac == h.prev && now-h.changed < window:
		h.prev, h.mac, h.at, h.changed = h.mac, mac, now, now
		return Conflict
	}
	h.prev, h.mac, h.at, h.changed = h.mac, mac, now, now
	return Move
}

// hostLRU holds the hosts seen in ARP and NDP, at most max of them: a map
// and a recency list, the least recently seen forgotten first to make
// room. It has no lock and does no I/O; the watcher locks around it.
type hostLRU struct {
	max            int
	hosts          map[table.Key]*host
	newest, oldest *host // the recency list: newest ... oldest
}

func newHostLRU(max int) *hostLRU {
	return &hostLRU{max: max, hosts: make(map[table.Key]*host)}
}

func (l *hostLRU) len() int { return len(l.hosts) }

// lookup returns the host of k, or nil.
func (l *hostLRU) lookup(k table.Key) *host { return l.hosts[k] }

// get returns the host of k, made the most recent, creating it; evicted
// says the least recent host was forgotten to make room.
func (l *hostLRU) get(k table.Key) (h *host, evicted bool) {
	h = l.hosts[k]
	if h == nil {
		if len(l.hosts) >= l.max && l.oldest != nil {
			l.remove(l.oldest)
			evicted = true
		}
		h = &host{key: k}
		l.hosts[k] = h
	}
	l.touch(h)
	return h, evicted
}

// expire forgets the hosts last seen at or before limit (Unix ns) and
// returns how many.
func (l *hostLRU) expire(limit int64) int {
	n := 0
	for h := l.oldest; h != nil && h.at <= limit; h = l.oldest {
		l.remove(h)
		n++
	}
	return n
}

// forgetLink forgets the hosts of an interface.
func (l *hostLRU) forgetLink(ifindex int32) {
	for k, h := range l.hosts {
		if k.Ifindex == ifindex {
			l.remove(h)
		}
	}
}

func (l *hostLRU) remove(h *host) {
	l.unlink(h)
	delete(l.hosts, h.key)
}

func (l *hostLRU) unlink(h *host) {
	if h.newer != nil {
		h.newer.older = h.older
	} else if l.newest == h {
		l.newest = h.older
	}
	if h.older != nil {
		h.older.newer = h.newer
	} else if l.oldest == h {
		l.oldest = h.newer
	}
	h.newer, h.older = nil, nil
}

// touch makes h the most recent.
func (l *hostLRU) touch(h *host) {
	if l.newest == h {
		return
	}
	l.unlink(h)
	h.older = l.newest
	if l.newest != nil {
		l.newest.newer = h
	}
	l.newest = h
	if l.oldest == nil {
		l.oldest = h
	}
}
