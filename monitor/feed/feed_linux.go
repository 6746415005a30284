package feed

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/count"
	"github.com/neighwatch/neighwatch/monitor/internal/pace"
	"github.com/neighwatch/neighwatch/table"
	"golang.org/x/sync/errgroup"
)

// Links is what the feed needs of the netlink mirror: when the table is
// loaded, which interfaces are watched, and a way to fetch entries the
// kernel created without telling netlink.
type Links interface {
	Ready() <-chan struct{}
	Interfaces() map[int32]string
	Lookup(keys []table.Key) (int, error)
	// ResyncAfterHooks dumps the tables again: what the kernel created
	// silently between the first dump and the tracer's hooks.
	ResyncAfterHooks()
}

// Config configures a Feed.
type Config struct {
	// Interval is how often hit counts and sightings reach the table.
	Interval time.Duration
	// Window out of every Period is how long the per-packet hooks are
	// attached while some entry is stale-long; never while none is.
	Window, Period time.Duration
	// HitSweep is how often the bypass counters no packet reached since
	// the sweep before are dropped in the kernel (0: a minute).
	HitSweep time.Duration
	Logger   *slog.Logger
}

// Feed runs a loaded tracer against the table.
type Feed struct {
	// The tracer and the table, each as the part of the feed that
	// calls it names it (tracer_linux.go, sink.go).
	mode        bpf.TracerMode
	hooks       Hooks
	filter      CandidateFilter
	seeder      Seeder
	readout     Readout
	transitions Transitions
	evidence    Evidence
	cands       Candidates
	demand      Demand
	entries     Entries

	links      Links
	cfg        Config
	log        *slog.Logger
	c          *count.Set[Counter]
	candidates atomic.Int64 // filter.Candidates() at the last rebuild
	ready      chan struct{}

	mu      sync.Mutex
	created map[table.Key]bool // seen created by the tracepoints, to look up

	// flush asks the evidence loop to read the counters now: at the end
	// of each window, so what it saw reaches the table at once.
	flush chan struct{}
	// createdSoon asks for the created entries to be looked up shortly.
	createdSoon chan struct{}

	// Announced by the programs since the last interval (under mu):
	// entries with bypass hits, and candidates seen at another MAC
	// (the MAC the announcement named; the kernel keeps none).
	hitKeys   map[bpf.HitKey]struct{}
	sightMACs map[bpf.HitKey]net.HardwareAddr
	// ownMACs: candidates seen at another MAC that sent from their own
	// (the MAC), since the last interval (under mu).
	ownMACs map[bpf.HitKey]net.HardwareAddr
	// unmirrored are entries that did not fit in the in-kernel maps
	// (under mu): counted, retried every minute.
	unmirrored map[bpf.HitKey]struct{}

	// Owned by the interval loop.
	watched, idxBuf []int
	last            map[bpf.HitKey]lastHit // counters' totals at the last read
	sweeps          uint32                 // hit sweeps done (lastHit.sweep)
	lastSweep       time.Time
	orphans         map[bpf.HitKey]struct{} // counters no read claimed at the last sweep
	walkBuf         []bpf.HitKey
	keyBuf          []bpf.HitKey
	totals          map[bpf.HitKey]uint64
	sights          map[bpf.HitKey]bpf.Sighting
	lastSizes       time.Time     // when the map sizes were last counted
	sizesTook       time.Duration // how long that count took
	lastRetry       time.Time     // when unmirrored entries were last retried
	candBuf         []bpf.Candidate
	candMACs        []byte // the candidates' MACs, back to back
	// candWalked: the candidates were walked whole before, so a walk
	// again must also prune what the map keeps of the last.
	candWalked bool
}

// Defaults is the feed's configuration on the agent's defaults. New
// fills a zero Interval from it; a zero Period means no duty cycle (the
// hooks stay attached while needed).
func Defaults() Config {
	return Config{Interval: time.Second, Window: time.Second, Period: 30 * time.Second}
}

// New returns a feed from tr to t.
func New(tr Tracer, t Table, links Links, cfg Config) *Feed {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := Defaults()
	if cfg.Interval <= 0 {
		cfg.Interval = d.Interval
	}
	if cfg.Period <= 0 { // no duty cycle: attached while needed
		cfg.Window, cfg.Period = d.Window, d.Window
	}
	if cfg.HitSweep <= 0 {
		cfg.HitSweep = time.Minute
	}
	return &Feed{mode: tr.Mode(), hooks: tr, filter: tr, seeder: tr, readout: tr,
		transitions: t, evidence: t, cands: t, demand: t, entries: t,
		links: links, cfg: cfg, log: cfg.Logger, ready: make(chan struct{}), created: map[table.Key]bool{},
		c:     count.NewSet(NumCounters),
		flush: make(chan struct{}, 1), createdSoon: make(chan struct{}, 1),
		hitKeys: map[bpf.HitKey]struct{}{}, sightMACs: map[bpf.HitKey]net.HardwareAddr{}, unmirrored: map[bpf.HitKey]struct{}{},
		ownMACs: map[bpf.HitKey]net.HardwareAddr{},
		last:    map[bpf.HitKey]lastHit{}, totals: map[bpf.HitKey]uint64{}, sights: map[bpf.HitKey]bpf.Sighting{},
		orphans:   map[bpf.HitKey]struct{}{},
		lastSizes: time.Now(), lastRetry: time.Now(), lastSweep: time.Now()} // the first count a while in, not during start-up
}

// Ready is closed once the tracer's mirror is seeded and its events are
// read: from then on bypass traffic reaches the table.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Counters returns the feed's counters.
func (f *Feed) Counters() Counters {
	var c Counters
	f.c.Snapshot(c[:])
	return c
}

// HookState returns how the hooks and the candidates stand now.
func (f *Feed) HookState() HookState {
	h := HookState{Candidates: int(f.candidates.Load())}
	h.Attached, h.AttachedTime = f.hooks.PerPacket()
	return h
}

// Run feeds the table until ctx ends. It waits for the table to be loaded
// first, since the tracer's mirror is seeded from it.
func (f *Feed) Run(ctx context.Context) error {
	select {
	case <-f.links.Ready():
	case <-ctx.Done():
		return nil
	}
	defer func() {
		if err := f.hooks.SetPerPacket(false); err != nil {
			f.log.Warn("tracer: detaching the per-packet hooks failed", "err", err)
		}
	}()
	f.syncWatched()
	// The neigh_create hook is attached (the tracer was loaded before the
	// feed runs); the first dump may be older: dump once more so nothing
	// created silently in between waits for the periodic resync.
	f.links.ResyncAfterHooks()
	n, err := f.seed()
	if err != nil {
		f.log.Warn("tracer: seeding the in-kernel mirror failed; entries are mirrored from their next change", "err", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return f.readout.ReadTransitions(ctx, f.applyTransition, func(error) { f.c.Add(TransitionsUndecoded, 1) })
	})
	g.Go(func() error { return f.sample(ctx) })
	g.Go(func() error { return f.lookupCreatedSoon(ctx) })
	close(f.ready)
	f.log.Info("tracer running", "mode", f.mode, "seeded", n, "interfaces", len(f.watched),
		"window", f.cfg.Window, "period", f.cfg.Period)
	g.Go(func() error {
		tick := time.NewTicker(f.cfg.Interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			case <-f.flush:
			}
			f.interval()
		}
	})
	return g.Wait()
}

// syncWatched tells the tracer which interfaces the mirror watches, when
// that changed.
func (f *Feed) syncWatched() {
	idx := f.idxBuf[:0]
	for i := range f.links.Interfaces() {
		idx = append(idx, int(i))
	}
	slices.Sort(idx)
	f.idxBuf = idx
	if slices.Equal(idx, f.watched) {
		return
	}
	if err := f.hooks.SetWatched(idx, false); err != nil {
		f.log.Warn("tracer: updating watched interfaces failed", "err", err)
		return
	}
	f.watched = slices.Clone(idx)
}

// sizesEvery and retryEvery pace the work that walks whole maps or sets.
// The mirror's count waits longer when it costs more (pace.Wait): 5
// minutes up to about 300,000 entries.
const (
	sizesEvery = 5 * time.Minute // neighwatch_tracer_map_entries{map="mirror"}: its help says so
	retryEvery = time.Minute
)

// interval is the work of every tracer interval: what the programs
// announced since the last one (bypass hits, sightings) reaches the table,
// and created entries are looked up. It reads only what was announced,
// so an idle table of 100,000 entries costs what one of 10 does.
func (f *Feed) interval() {
	f.syncWatched()
	// A new epoch first: whatever is counted from here on is announced
	// again, and read at the next interval.
	if err := f.filter.BumpEpoch(); err != nil {
		f.log.Warn("tracer: starting a new epoch failed", "err", err)
	}
	f.mu.Lock()
	hits := f.takeKeys(f.hitKeys)
	f.mu.Unlock()
	f.applyHits(hits)
	f.mu.Lock()
	var sights map[bpf.HitKey]net.HardwareAddr
	if len(f.sightMACs) > 0 {
		sights = f.sightMACs
		f.sightMACs = make(map[bpf.HitKey]net.HardwareAddr, len(sights))
	}
	own := f.ownMACs
	if len(own) > 0 {
		f.ownMACs = make(map[bpf.HitKey]net.HardwareAddr, len(own))
	}
	f.mu.Unlock()
	f.applySources(sights, own)
	f.lookupCreated()
	f.syncCandidates(false)
	if time.Since(f.lastRetry) >= retryEvery {
		f.retryUnmirrored()
		f.lastRetry = time.Now()
	}
	if time.Since(f.lastSweep) >= f.cfg.HitSweep {
		f.forgetLast()
		f.sweepHits()
		f.lastSweep = time.Now()
	}
	if time.Since(f.lastSizes) >= pace.Wait(sizesEvery, f.sizesTook) {
		cost := pace.Start()
		f.seeder.RefreshMirrorSize()
		f.lastSizes = time.Now()
		f.sizesTook = cost.Took()
	}
}

// takeKeys moves a set's keys into the reusable buffer and empties it.
// Call it with mu held.
func (f *Feed) takeKeys(set map[bpf.HitKey]struct{}) []bpf.HitKey {
	keys := f.keyBuf[:0]
	for hk := range set {
		keys = append(keys, hk)
	}
	clear(set)
	f.keyBuf = keys
	return keys
}

// seed fills the tracer's mirror from the table entry by entry, so a
// table of 100,000 entries is never copied whole.
func (f *Feed) seed() (int, error) {
	// Seeding makes short-lived garbage per entry; collect it more often
	// than usual meanwhile so the heap does not double for it, and give
	// the memory back afterwards.
	gc := debug.SetGCPercent(25)
	defer func() {
		debug.SetGCPercent(gc)
		debug.FreeOSMemory()
	}()
	batch := make([]bpf.SeedEntry, 0, 1024)
	macs := make([]byte, 0, 6*cap(batch))
	n := 0
	flush := func() error {
		k, missed, err := f.seeder.Seed(batch)
		n += k
		batch = batch[:0]
		f.mu.Lock()
		for _, m := range missed {
			f.unmirrored[m] = struct{}{}
		}
		f.mu.Unlock()
		return err
	}
	var err error
	for from := uint32(0); ; {
		macs = macs[:0] // the last batch's are seeded
		from = f.entries.Range(from, cap(batch), func(e *table.Entry) {
			// The lladdr is the table's: copied, into one buffer a batch.
			n := len(macs)
			macs = append(macs, e.LLAddr...)
			batch = append(batch, bpf.SeedEntry{Ifindex: int(e.Ifindex), Addr: e.Addr, State: uint8(e.State), MAC: net.HardwareAddr(macs[n:len(macs):len(macs)])})
		})
		if err = flush(); err != nil || from == 0 {
			break
		}
	}
	if err != nil {
		return n, err
	}
	f.syncCandidates(true)
	return n, nil
}

// sample attaches the per-packet hooks only while some entry is
// stale-long, and then for a window out of every period, and early when
// an entry turns stale-long between two. Each window starts with the
// current STALE entries as source-MAC candidates.
func (f *Feed) sample(ctx context.Context) error {
	s := sampler{window: f.cfg.Window, period: f.cfg.Period}
	timer := time.NewTimer(0)
	defer timer.Stop()
	attached, bypassOn := false, false
	staleLong := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		// Entries neighwatch manages are watched too, by their own
		// packets only: their host may move while the kernel still holds
		// them REACHABLE. Bypass counting is for stale-long entries.
		// An entry that just turned stale-long (the count grew) is
		// watched at once, by an early window, while the budget lasts.
		n := f.demand.CountClass(table.ClassStaleLong)
		fresh := n > staleLong
		staleLong = n
		bypass := n > 0
		need := bypass || f.demand.CountOwned() > 0
		on, wake := s.step(time.Now(), need, fresh)
		if on != attached || (on && bypass != bypassOn) {
			f.log.Debug("tracer: per-packet hooks", "attached", on, "bypass", on && bypass, "stale_long", n)
			if err := f.hooks.SetHooks(on && bypass, on); err != nil {
				f.log.Warn("tracer: switching the per-packet hooks failed", "on", on, "err", err)
			}
			if !on && attached {
				select {
				case f.flush <- struct{}{}:
				default:
				}
			}
			attached, bypassOn = on, on && bypass
		}
		timer.Reset(wake)
	}
}

// syncCandidates keeps the source-MAC program's candidates those of the
// table: every STALE entry, young ones too (evidence gathered before an
// entry turns stale-long makes it stuck the moment it does, so a moved
// host that keeps talking is found within the threshold plus one period),
// and every entry neighwatch manages, in any state (the kernel
// re-validates those only when their reachable time runs out). All of
// them at start; after that, each interval, only those that changed, so
// an interval costs what changed and not the table's size.
func (f *Feed) syncCandidates(all bool) {
	cs, macs := f.candBuf[:0], f.candMACs[:0]
	add := func(k table.Key, lladdr string) {
		c := bpf.Candidate{Ifindex: int(k.Ifindex), Addr: k.Addr}
		if len(lladdr) == 6 {
			// A copy, as lladdr is the table's, into one buffer for the
			// batch rather than a slice an entry. Growth moves what
			// follows; what is already in cs keeps the old array.
			n := len(macs)
			macs = append(macs, lladdr...)
			c.MAC = net.HardwareAddr(macs[n : n+6 : n+6])
		}
		cs = append(cs, c)
	}
	var errs []error
	if !all && f.cands.CandidateChanges(add) {
		if len(cs) == 0 {
			return
		}
		_, err := f.filter.UpdateCandidates(cs)
		errs = append(errs, err)
	} else {
		// The whole set, a batch at a time: nothing the size of the
		// table is held, and the table's lock only for a batch.
		for from := uint32(0); ; {
			cs, macs = cs[:0], macs[:0]
			from = f.cands.Candidates(from, candBatch, add)
			_, err := f.filter.UpdateCandidates(cs)
			errs = append(errs, err)
			if from == 0 {
				break
			}
		}
		if f.candWalked {
			// What the map still holds that the table no longer names.
			errs = append(errs, f.filter.PruneCandidates(func(ifindex int, addr netip.Addr) bool {
				return f.cands.IsCandidate(table.Key{Ifindex: int32(ifindex), Addr: addr})
			}))
		}
		f.candWalked = true
	}
	if err := errors.Join(errs...); err != nil {
		f.log.Warn("tracer: setting source-MAC candidates", "err", err)
	}
	f.candidates.Store(int64(f.filter.Candidates()))
	if cap(cs) > 4096 {
		cs = nil // a storm's: let it go
	}
	if cap(macs) > 8*candBatch {
		macs = nil
	}
	f.candBuf, f.candMACs = cs[:0], macs[:0]
}

// candBatch is how many candidates a full walk hands the tracer at once.
const candBatch = 4096

func (f *Feed) applyTransition(tr bpf.SilentTransition) {
	k := keyOf(tr.Key)
	if tr.Source == bpf.SourceRouted {
		f.nameGateway(tr)
		return
	}
	switch tr.Source {
	case bpf.SourceHit, bpf.SourceSighting, bpf.SourceUnmirrored, bpf.SourceOwn:
		f.mu.Lock()
		switch tr.Source {
		case bpf.SourceHit:
			f.hitKeys[tr.Key] = struct{}{}
		case bpf.SourceSighting:
			f.sightMACs[tr.Key] = tr.MAC
		case bpf.SourceOwn:
			f.ownMACs[tr.Key] = tr.MAC
		default:
			f.unmirrored[tr.Key] = struct{}{}
		}
		f.mu.Unlock()
		return
	}
	if tr.Source == "neigh_create" {
		// The entry may never be reported by netlink: look it up soon.
		f.mu.Lock()
		f.created[k] = true
		f.mu.Unlock()
		select {
		case f.createdSoon <- struct{}{}:
		default:
		}
		return
	}
	if f.transitions.ApplyTracepoint(k, table.State(tr.From), table.State(tr.To), time.Now()) {
		f.c.Add(TransitionsApplied, 1)
	} else {
		f.c.Add(TransitionsOvertaken, 1)
	}
}

// nameGateway answers the transmit hook at once: bypass traffic on an
// interface was routed to a MAC, and the table names the STALE entry of
// that interface and family with it (the gateway), or that none is. The
// hook asks at most once an epoch for each such MAC, so the walk of the
// interface's STALE entries this takes is rare.
func (f *Feed) nameGateway(tr bpf.SilentTransition) {
	fam := table.FamilyInet
	if tr.Key.Addr.Is6() {
		fam = table.FamilyInet6
	}
	gw, _ := f.cands.StaleWithMAC(int32(tr.Key.Ifindex), fam, string(tr.MAC))
	if err := f.readout.NameGateway(tr.Key.Ifindex, tr.Key.Addr, tr.MAC, gw); err != nil {
		f.log.Warn("tracer: naming the gateway of routed traffic failed", "err", err)
	}
}

// createdDelay lets the kernel finish creating an entry (the tracepoint
// fires before it is in the table) before it is looked up.
const createdDelay = 100 * time.Millisecond

// lookupCreatedSoon looks the created entries up shortly after the
// tracepoint names them, so the table holds them within a second; the
// tracer interval's lookups catch what one finds not there yet.
func (f *Feed) lookupCreatedSoon(ctx context.Context) error {
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.createdSoon:
		}
		t.Reset(createdDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		f.lookupCreated()
	}
}

// lookupCreated asks the kernel for the entries the tracepoints saw
// created that the table does not hold.
func (f *Feed) lookupCreated() {
	f.mu.Lock()
	var keys []table.Key
	for k := range f.created {
		keys = append(keys, k)
	}
	clear(f.created)
	f.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	f.c.Add(Created, uint64(len(keys)))
	if _, err := f.links.Lookup(keys); err != nil {
		f.log.Debug("tracer: looking up created entries", "err", err)
	}
}

// applyHits adds the bypass packets counted since the last read to the
// entries announced: the totals are read of those alone.
func (f *Feed) applyHits(keys []bpf.HitKey) {
	if len(keys) == 0 {
		return
	}
	if err := f.readout.HitsOf(keys, f.totals); err != nil {
		f.log.Warn("tracer: reading hits failed", "err", err)
		return
	}
	now := time.Now()
	for hk, total := range f.totals {
		tk := keyOf(hk)
		e, ok := f.entries.Lookup(tk)
		if !ok {
			f.c.Add(HitsUnattributed, total-min(total, f.last[hk].packets))
			delete(f.last, hk)
			continue
		}
		var d uint64
		d, f.last[hk] = f.last[hk].counted(total, e.Since, f.sweeps)
		if d > 0 {
			if !f.evidence.AddBypass(tk, d, now) {
				f.c.Add(HitsUnattributed, d)
			}
		}
	}
}

// forgetLast drops the totals of entries that left STALE or the table;
// the programs deleted their counters then.
func (f *Feed) forgetLast() {
	for hk := range f.last {
		if e, ok := f.entries.Lookup(keyOf(hk)); !ok || e.State != table.StateStale {
			delete(f.last, hk)
		}
	}
}

// sweepHits drops the bypass counters of entries no packet reached
// since the sweep before: the kernel's hit map then holds the entries
// with bypass traffic in the last sweep or two, not every entry that had
// some in its STALE period, and is sized for those (bpf.MaxHitEntries)
// rather than for the table. A dropped counter starts again from zero
// with its next packet, which the programs announce; its total here goes
// with it, so that packet counts in full.
func (f *Feed) sweepHits() {
	f.sweeps++
	keys, err := f.readout.HitKeys(f.walkBuf[:0])
	f.walkBuf = keys
	if err != nil {
		f.log.Warn("tracer: walking the bypass counters failed", "err", err)
		return
	}
	f.mu.Lock() // announced since this interval's read: not idle
	drop := idleHits(keys, f.last, f.hitKeys, f.orphans, f.sweeps)
	f.mu.Unlock()
	if len(drop) == 0 {
		return
	}
	if _, err := f.readout.DropHits(drop); err != nil {
		f.log.Warn("tracer: dropping idle bypass counters failed", "err", err)
	}
	for _, hk := range drop {
		delete(f.last, hk)
	}
}

// retryUnmirrored forgets the entries that no longer need mirroring or
// are mirrored now (a tracepoint got them in since), and seeds the rest
// again: the maps may have room now.
func (f *Feed) retryUnmirrored() {
	f.mu.Lock()
	keys := make([]bpf.HitKey, 0, len(f.unmirrored))
	for hk := range f.unmirrored {
		keys = append(keys, hk)
	}
	f.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	var retry []bpf.SeedEntry
	var done []bpf.HitKey
	for _, hk := range keys {
		e, ok := f.entries.Lookup(keyOf(hk))
		if !ok || f.seeder.Mirrored(hk) {
			done = append(done, hk)
			continue
		}
		retry = append(retry, bpf.SeedEntry{Ifindex: int(e.Ifindex), Addr: e.Addr, State: uint8(e.State), MAC: e.HardwareAddr()})
	}
	_, missed, err := f.seeder.Seed(retry)
	if err != nil {
		f.log.Warn("tracer: mirroring entries that did not fit failed", "err", err)
	}
	still := make(map[bpf.HitKey]bool, len(missed))
	for _, m := range missed {
		still[m] = true
	}
	f.mu.Lock()
	for _, hk := range done {
		delete(f.unmirrored, hk)
	}
	for _, r := range retry {
		if hk := (bpf.HitKey{Ifindex: r.Ifindex, Addr: r.Addr}); !still[hk] && f.seeder.Mirrored(hk) {
			delete(f.unmirrored, hk)
		}
	}
	f.mu.Unlock()
}

// Unmirrored returns, per interface, how many STALE entries the table
// holds that did not fit in the tracer's maps: their bypass traffic is not
// counted.
func (f *Feed) Unmirrored() map[int32]int {
	f.mu.Lock()
	keys := make([]bpf.HitKey, 0, len(f.unmirrored))
	for hk := range f.unmirrored {
		keys = append(keys, hk)
	}
	f.mu.Unlock()
	out := map[int32]int{}
	for _, hk := range keys {
		if e, ok := f.entries.Lookup(keyOf(hk)); ok && e.State == table.StateStale {
			out[e.Ifindex]++
		}
	}
	return out
}

// applySources turns what the source-MAC program announced since the
// last read into evidence (observeSources): the packets counted from
// other MACs, at the MAC the last announcement named, and the entries'
// own MACs heard.
func (f *Feed) applySources(sights, own map[bpf.HitKey]net.HardwareAddr) {
	if len(sights) > 0 {
		if err := f.readout.SightingsOf(sights, f.sights); err != nil {
			f.log.Warn("tracer: reading source-MAC sightings failed", "err", err)
			clear(f.sights)
		}
	} else {
		clear(f.sights)
	}
	for _, s := range f.sights {
		f.c.Add(SourcePackets, s.Packets)
	}
	observeSources(f.evidence, f.sights, own, time.Now())
}
