// Package table is the neighbour table every part of neighwatch shares:
// the mirrored entries, their classification and the event stream. Sources
// (the netlink mirror, ARP/NDP evidence, the tracer feed) write to it;
// readers (metrics, remediation, the control API) read it. Of the
// project it imports only internal/quote (how a refusal quotes its input),
// and it builds on any OS.
//
// One core (table.go: the entries, their indexes and aggregates, one
// lock) in five parts, each a type in its own file: Kernel (kernel.go:
// netlink updates, syncs, links, tracepoint transitions), Sightings
// (sightings.go: where the host was seen or heard, probes, conflicts,
// bypass traffic), CandidateSet (candidates.go: the entries the tracer
// watches), Classifier (classify.go: classes, aggregates, walks and the
// event stream) and Reader (table.go: entries by key, in slot order, or
// all). A *Table embeds the five and so has every method; each source
// or reader declares the few it calls as its own interface
// (mirror.Sink, evidence.Sink, feed.Candidates, remediate's parts,
// control.Table, metrics.TableReader), which a *Table satisfies, and
// holds that.
//
// An entry has one name per layer, each a different thing: Entry is the
// copy a reader gets (entry.go; e in this package, en in remediate);
// Observed is the part of it that says what was seen of the host (o);
// rec is the packed record the store keeps in its slabs (store.go; r);
// ent is a record held under the lock with its slot (ent.go; le, a
// locked entry), valid until the lock is released.
//
// Every write takes one path, in update.go, top to bottom: apply finds
// the entry in the store (store.go: records in slabs, an index by key)
// and removes, creates or changes it; detach and attach keep the
// aggregates and set the class; candChanged notes a change of what the
// tracer watches; event builds what the table publishes. The records'
// times count from an epoch (mstime.go: timebase). callpath
// (internal/dev/callpath) writes the path down.
package table
