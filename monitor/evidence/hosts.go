package evidence

import (
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/neighwatch/neighwatch/table"
)

// host is what was seen of one IP on one interface: the MAC it last
// answered from, and the one before it.
type host struct {
	mac     string
	at      int64 // last seen at mac
	prev    string
	changed int64 // when mac replaced prev
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

// hostLRU holds the hosts seen in ARP and NDP, at most max of them, the
// least recently seen forgotten first to make room (golang-lru's simple
// LRU: no lock, no goroutine; the watcher locks around it). Hosts not
// seen for a while are forgotten by the watcher's clock, the one its
// observations carry, from the least recent end.
type hostLRU struct {
	lru *simplelru.LRU[table.Key, *host]
}

func newHostLRU(max int) *hostLRU {
	l, err := simplelru.NewLRU[table.Key, *host](max, nil)
	if err != nil {
		panic("evidence: " + err.Error()) // max < 1: New sets a default
	}
	return &hostLRU{lru: l}
}

func (l *hostLRU) len() int { return l.lru.Len() }

// lookup returns the host of k, or nil, leaving its recency alone.
func (l *hostLRU) lookup(k table.Key) *host {
	h, _ := l.lru.Peek(k)
	return h
}

// get returns the host of k, made the most recent, creating it; evicted
// says the least recent host was forgotten to make room.
func (l *hostLRU) get(k table.Key) (h *host, evicted bool) {
	if h, ok := l.lru.Get(k); ok {
		return h, false
	}
	h = &host{}
	return h, l.lru.Add(k, h)
}

// expire forgets the hosts last seen at or before limit (Unix ns) and
// returns how many.
func (l *hostLRU) expire(limit int64) int {
	n := 0
	for _, h, ok := l.lru.GetOldest(); ok && h.at <= limit; _, h, ok = l.lru.GetOldest() {
		l.lru.RemoveOldest()
		n++
	}
	return n
}

// forgetLink forgets the hosts of an interface.
func (l *hostLRU) forgetLink(ifindex int32) {
	for _, k := range l.lru.Keys() {
		if k.Ifindex == ifindex {
			l.lru.Remove(k)
		}
	}
}
