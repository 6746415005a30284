package table

import (
	"sync"
	"sync/atomic"
)

// Broadcaster fans events out to subscribers without ever blocking the
// publisher: a subscriber whose buffer is full loses the event, and the loss
// is counted for it, for its kind of subscriber, and in total.
type Broadcaster struct {
	mu      sync.RWMutex
	subs    map[*Subscription]struct{}
	hooks   map[*hook]struct{}
	active  atomic.Bool
	dropped atomic.Uint64
	// gone are the losses of closed subscribers, by who (under mu).
	gone map[Subscriber]uint64
}

// Subscriber says who a subscriber is, for the count of the events it
// lost: each of the agent's subscribers says what it is (SubscribeAs);
// Subscribe and SubscribeFunc make a SubscriberOther.
type Subscriber string

// The subscribers.
const (
	SubscriberStream  Subscriber = "events"  // a client of the control API's event stream (neighwatch events)
	SubscriberManaged Subscriber = "managed" // the managed entries' recovery tracker
	SubscriberAction  Subscriber = "action"  // a remediation action waiting for the kernel's answer
	SubscriberOther   Subscriber = "other"
)

// Subscribers lists every Subscriber.
func Subscribers() []Subscriber {
	return []Subscriber{SubscriberStream, SubscriberManaged, SubscriberAction, SubscriberOther}
}

// hook is a function Publish calls with every event (Hook).
type hook struct{ fn func(Event) }

// Subscription is one subscriber's view of the event stream.
type Subscription struct {
	c       chan Event
	b       *Broadcaster
	who     Subscriber
	keep    func(Event) bool // nil: every event
	dropped atomic.Uint64
	once    sync.Once
}

// NewBroadcaster returns a broadcaster without subscribers.
func NewBroadcaster() *Broadcaster {
	return &Broadcaster{subs: make(map[*Subscription]struct{}), hooks: make(map[*hook]struct{}), gone: map[Subscriber]uint64{}}
}

// Hook has fn called with every event as it is published, before
// Publish returns and under the publisher's lock (the table's): fn must
// be quick, must not block and must not call the table. Unlike a
// subscriber, whose buffer may be full, a hook never misses an event. fn
// must not hold on to the event's MACs, which may be the table's own
// bytes: it copies what it keeps. The returned func removes the hook.
func (b *Broadcaster) Hook(fn func(Event)) (remove func()) {
	h := &hook{fn: fn}
	b.mu.Lock()
	b.hooks[h] = struct{}{}
	b.active.Store(true)
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.hooks, h)
			b.active.Store(len(b.subs)+len(b.hooks) > 0)
			b.mu.Unlock()
		})
	}
}

// Subscribe registers a subscriber with a buffer of n events.
func (b *Broadcaster) Subscribe(n int) *Subscription { return b.SubscribeAs(SubscriberOther, n, nil) }

// SubscribeFunc registers a subscriber of the events keep accepts, as
// SubscribeAs does, counted as SubscriberOther.
func (b *Broadcaster) SubscribeFunc(n int, keep func(Event) bool) *Subscription {
	return b.SubscribeAs(SubscriberOther, n, keep)
}

// SubscribeAs registers a subscriber, who (a Subscriber constant), that
// receives only the events keep accepts (nil: every one); the others are
// neither sent nor counted as lost for it. keep
// takes the event by value: a pointer would move every event published to
// the heap, and a burst (100,000 entries crossing the threshold together)
// would allocate for each, kept or not. keep must not hold on to the
// event: until it is kept, its MACs may be the table's own bytes.
func (b *Broadcaster) SubscribeAs(who Subscriber, n int, keep func(Event) bool) *Subscription {
	if n < 1 {
		n = 1
	}
	c := make(chan Event, n)
	s := &Subscription{c: c, b: b, who: who, keep: keep}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.active.Store(true)
	b.mu.Unlock()
	return s
}

// C returns the channel events arrive on; it is closed by Close.
func (s *Subscription) C() <-chan Event { return s.c }

// Close unsubscribes and closes the channel.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.b.mu.Lock()
		delete(s.b.subs, s)
		if n := s.dropped.Load(); n > 0 {
			s.b.gone[s.who] += n
		}
		s.b.active.Store(len(s.b.subs)+len(s.b.hooks) > 0)
		close(s.c)
		s.b.mu.Unlock()
	})
}

// Dropped returns how many events this subscriber lost.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Active reports whether anyone listens; publishers skip building events
// when nobody does.
func (b *Broadcaster) Active() bool { return b.active.Load() }

// Dropped returns the events lost by all subscribers together.
func (b *Broadcaster) Dropped() uint64 { return b.dropped.Load() }

// DroppedBy returns the events lost, by who lost them (closed subscribers
// included): only those who lost some.
func (b *Broadcaster) DroppedBy() map[Subscriber]uint64 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	by := make(map[Subscriber]uint64, len(b.gone)+1)
	for who, n := range b.gone {
		by[who] = n
	}
	for s := range b.subs {
		if n := s.dropped.Load(); n > 0 {
			by[s.who] += n
		}
	}
	return by
}

// Publish calls every hook with ev, then delivers it to every subscriber
// that has room. An event the
// table built on its own bytes is copied once, for the first subscriber
// that keeps it.
func (b *Broadcaster) Publish(ev Event) {
	b.mu.RLock()
	for h := range b.hooks {
		h.fn(ev)
	}
	for s := range b.subs {
		if s.keep != nil && !s.keep(ev) {
			continue
		}
		ev.own()
		select {
		case s.c <- ev:
		default:
			s.dropped.Add(1)
			b.dropped.Add(1)
		}
	}
	b.mu.RUnlock()
}
