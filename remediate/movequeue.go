package remediate

import (
	"container/list"
	"sync"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Which moves are checked when there are more than the probe budget
// allows. Anyone on a segment can move entries (a gratuitous reply
// moves one at once), so a flood of moves can bury the one move that
// hijacks a host. The checks wait in a moveQueue of at most moveQueueCap,
// one per entry, ranked by what is at stake; a worker takes the highest
// first, and a move that finds the queue full takes the place of the
// oldest of a lower stake, or is dropped (and counted) when none is
// lower. A flood of moves thus costs the checks that matter nothing but
// a place in line behind checks of as much at stake, and costs the
// network no more probes than the rate limits allow.
//
// The stake of a move is four facts, ranked:
//   - in use: traffic used the entry within moveInUse (kernel output, or
//     bypass traffic the tracer counted): a hijack of it takes traffic,
//     a next hop's most of all;
//   - heard: the MAC the entry leaves was heard for the address within
//     moveHeard (its ARP or NDP, its packets, an answer to a probe): a
//     host that lives there, which a hijack displaces, and which answers
//     the check if it is still there. A flood that moves addresses whose
//     MACs nobody has heard (gone hosts, or entries the sender made)
//     ranks below it; a flood of addresses heard lately is a flood of
//     hosts that answer, each check a conflict;
//   - settled: the address was not seen moving before (this is the
//     first move the table saw, or its old MAC held for moveSettled); a
//     flood moves the same addresses again and again;
//   - one of few: entries moved to its new MAC fewer than manyClaims
//     times within the last claimWindow or two (each move a claim); a
//     MAC that claims many addresses at once is a spoofer or a proxy,
//     and its claims are the evidence, not each of its moves.
//
// The watcher queues a move while the table publishes it (the table's
// lock held), so the queue sees every move the table does: none is lost
// between them. A move the mirror missed (its netlink socket
// overflowed) is found by the resync that follows, which publishes it as
// a move like any other. Moves of an entry whose check waits are folded
// into it: the check asks the MAC the entry had before the first of
// them, at the stake of the last (the address was seen moving again),
// in use if any was; a move back to that MAC ends it.

// stake ranks a move check: the bits add up, the highest first.
type stake uint8

const (
	stakeFewClaims stake = 1 << iota // few moves went to the new MAC lately
	stakeSettled                     // the address was not seen moving before
	stakeHeard                       // the MAC it leaves was heard for it lately
	stakeInUse                       // traffic used the entry lately

	numStakes = 1 << iota
)

// The move queue's limits.
const (
	moveQueueCap = 1024             // checks waiting
	moveInUse    = time.Minute      // traffic this recent puts the entry in use
	moveHeard    = time.Hour        // the old MAC heard this recently lived there
	moveSettled  = time.Minute      // an old MAC held this long was not moving
	claimWindow  = 10 * time.Second // claims are counted over one or two of these
	manyClaims   = 16               // claims in that time that make a MAC a flood's
	claimMACs    = 4096             // MACs counted in one window; more are not
)

// moveStake is what is at stake in a move the table announced.
func moveStake(ev *table.Event, claims int) stake {
	var s stake
	if claims < manyClaims {
		s |= stakeFewClaims
	}
	if ev.Moves <= 1 || (ev.OldLLAddrSince != 0 && ev.Time.UnixNano()-ev.OldLLAddrSince >= int64(moveSettled)) {
		s |= stakeSettled
	}
	if ev.LastUsed != 0 && ev.Time.UnixNano()-ev.LastUsed < int64(moveInUse) {
		s |= stakeInUse
	}
	if ev.OldHeard != 0 && ev.Time.UnixNano()-ev.OldHeard < int64(moveHeard) {
		s |= stakeHeard
	}
	return s
}

// moveQueue holds the moves waiting for a check.
type moveQueue struct {
	mu     sync.Mutex
	cap    int
	byKey  map[table.Key]*list.Element // of *moveCheck
	stakes [numStakes]list.List        // each oldest first
	claims claims
	// ready holds a token while checks wait: a worker that takes it
	// takes a check, and puts the token back if more wait.
	ready chan struct{}
	// dropped counts a check dropped for want of room; droppedOn counts
	// them by interface, from 0 on each interface a move was queued on,
	// so that a flood shows where it is (NeighbourMoveFlood).
	dropped   func()
	droppedOn map[int32]uint64
}

func newMoveQueue(capacity int, dropped func()) *moveQueue {
	return &moveQueue{cap: capacity, byKey: make(map[table.Key]*list.Element), ready: make(chan struct{}, 1),
		dropped: dropped, droppedOn: make(map[int32]uint64), claims: claims{cur: make(map[string]int), prev: make(map[string]int)}}
}

// drop counts a check of a move on ifindex dropped.
func (q *moveQueue) drop(ifindex int32) {
	q.droppedOn[ifindex]++
	q.dropped()
}

// Flood is what the move checks say of one interface: the checks
// dropped for want of room since the agent started, and how long the
// oldest waiting check has waited (0 when none waits).
type Flood struct {
	Dropped    uint64
	OldestWait time.Duration
}

// floods returns each interface a move was queued on, with its drops and
// its oldest wait at now.
func (q *moveQueue) floods(now time.Time) map[int32]Flood {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[int32]Flood, len(q.droppedOn))
	for ifindex, n := range q.droppedOn {
		out[ifindex] = Flood{Dropped: n}
	}
	for _, el := range q.byKey {
		mc := el.Value.(*moveCheck)
		f := out[mc.key.Ifindex]
		f.OldestWait = max(f.OldestWait, now.Sub(time.Unix(0, mc.queued)))
		out[mc.key.Ifindex] = f
	}
	return out
}

// add queues the check of a move the table published; ev is the move.
// It runs under the table's lock: it must not call the table.
func (q *moveQueue) add(ev *table.Event) {
	k := table.Key{Ifindex: ev.Ifindex, Addr: ev.IP}
	now := string(ev.LLAddr) // one copy of the table's bytes, for the claims and the check
	q.mu.Lock()
	defer q.mu.Unlock()
	st := moveStake(ev, q.claims.add(now, ev.Time.UnixNano()))
	if el := q.byKey[k]; el != nil {
		mc := el.Value.(*moveCheck)
		if now == mc.old {
			q.remove(el) // back where it was before: nothing to ask
			return
		}
		// Seen moving again: the stake is the new move's, but traffic
		// that used the entry still did, and the MAC the check asks was
		// heard.
		mc.now = now
		if st |= mc.stake & (stakeInUse | stakeHeard); st != mc.stake {
			q.stakes[mc.stake].Remove(el)
			mc.stake = st
			q.byKey[k] = q.stakes[st].PushBack(mc)
		}
		return
	}
	if _, ok := q.droppedOn[k.Ifindex]; !ok {
		q.droppedOn[k.Ifindex] = 0 // counted from 0 on each interface that moves
	}
	if len(q.byKey) >= q.cap {
		low := q.lowest()
		if low < 0 || stake(low) >= st {
			q.drop(k.Ifindex)
			return
		}
		lowest := q.stakes[low].Front() // the oldest of the lowest stake
		q.drop(lowest.Value.(*moveCheck).key.Ifindex)
		q.remove(lowest)
	}
	q.byKey[k] = q.stakes[st].PushBack(&moveCheck{key: k, old: string(ev.OldLLAddr), now: now, stake: st, queued: ev.Time.UnixNano()})
	q.signal()
}

// take returns the waiting check of the highest stake, the oldest of
// those; false when none waits.
func (q *moveQueue) take() (moveCheck, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for s := numStakes - 1; s >= 0; s-- {
		if el := q.stakes[s].Front(); el != nil {
			mc := *el.Value.(*moveCheck)
			q.remove(el)
			if len(q.byKey) > 0 {
				q.signal()
			}
			return mc, true
		}
	}
	return moveCheck{}, false
}

// Len returns how many checks wait.
func (q *moveQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.byKey)
}

// lowest returns the lowest stake a check waits at, -1 when none waits.
func (q *moveQueue) lowest() int {
	for s := range numStakes {
		if q.stakes[s].Len() > 0 {
			return s
		}
	}
	return -1
}

func (q *moveQueue) remove(el *list.Element) {
	mc := el.Value.(*moveCheck)
	q.stakes[mc.stake].Remove(el)
	delete(q.byKey, mc.key)
}

func (q *moveQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// claims counts the moves to each MAC over the current window and the
// one before, for at most claimMACs MACs a window.
type claims struct {
	start     int64 // Unix ns the current window began
	cur, prev map[string]int
}

// add counts a move to mac at now and returns the moves to it in the
// two windows.
func (c *claims) add(mac string, now int64) int {
	if now-c.start >= int64(claimWindow) {
		if now-c.start >= 2*int64(claimWindow) {
			clear(c.cur) // the window before is over too
		}
		c.prev, c.cur = c.cur, c.prev
		clear(c.cur)
		c.start = now
	}
	n, ok := c.cur[mac]
	if ok || len(c.cur) < claimMACs {
		n++
		c.cur[mac] = n
	}
	return n + c.prev[mac]
}
