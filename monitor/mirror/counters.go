package mirror

import "sync/atomic"

// Counters are the mirror's operational counters at one moment.
type Counters struct {
	Messages        uint64 // neighbour messages applied to the table
	Ignored         uint64 // messages for unwatched interfaces, other families or proxies
	Dumps           uint64 // full dumps completed
	ResyncENOBUFS   uint64 // resyncs after the socket overflowed
	ResyncInterrupt uint64 // dumps redone because the kernel flagged them inconsistent
	ResyncLink      uint64 // resyncs after an interface came into scope
	ResyncError     uint64 // resyncs after another socket error
	ResyncPeriodic  uint64 // scheduled reconciliations
	ResyncHooks     uint64 // once the tracer's neigh_create hook is attached
	ErrENOBUFS      uint64
	ErrDecode       uint64
	ErrSocket       uint64
	LinkResubscribe uint64 // link subscriptions that failed and were renewed
	LinkENOBUFS     uint64 // link sockets that overflowed, after which the links were listed again
	Lookups         uint64 // entries added by Lookup: created without a notification
}

// counters is the live form of Counters.
type counters struct {
	messages, ignored, dumps                                                       atomic.Uint64
	resyncENOBUFS, resyncInterrupt, resyncLink, resyncError                        atomic.Uint64
	resyncPeriodic, errENOBUFS, errDecode, errSocket, linkResubscribe, linkENOBUFS atomic.Uint64
	resyncHooks                                                                    atomic.Uint64
	lookups                                                                        atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Messages: c.messages.Load(), Ignored: c.ignored.Load(), Dumps: c.dumps.Load(),
		ResyncENOBUFS: c.resyncENOBUFS.Load(), ResyncInterrupt: c.resyncInterrupt.Load(),
		ResyncLink: c.resyncLink.Load(), ResyncError: c.resyncError.Load(), ResyncPeriodic: c.resyncPeriodic.Load(),
		ResyncHooks: c.resyncHooks.Load(),
		ErrENOBUFS:  c.errENOBUFS.Load(), ErrDecode: c.errDecode.Load(), ErrSocket: c.errSocket.Load(),
		LinkResubscribe: c.linkResubscribe.Load(), LinkENOBUFS: c.linkENOBUFS.Load(), Lookups: c.lookups.Load(),
	}
}
