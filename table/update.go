package table

import (
	"net/netip"
	"time"
)

// Update is one kernel neighbour message (RTM_NEWNEIGH or RTM_DELNEIGH)
// after decoding: the entry's whole state as the kernel sent it. Dump
// replies and notifications are both Updates.
type Update struct {
	Delete   bool
	Family   Family
	Ifindex  int32
	State    State
	Flags    uint8  // ndm_flags
	FlagsExt uint32 // NDA_FLAGS_EXT
	Protocol uint8  // NDA_PROTOCOL: who made the entry (0 unless set)
	Addr     netip.Addr
	LLAddr   []byte // may alias the message buffer; the table copies it

	// HasCacheInfo says whether the message carried NDA_CACHEINFO. The
	// ages are how long before the message the entry was last confirmed,
	// used by kernel output, and updated (its last state change).
	HasCacheInfo                      bool
	ConfirmedAge, UsedAge, UpdatedAge time.Duration
}
