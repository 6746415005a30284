// Package feed is the third source of the table: it connects the eBPF
// tracer to it, seeding the tracer's in-kernel mirror from the table,
// applying the transitions only the tracepoints see, and turning the
// tracer's hit counts into bypass evidence.
package feed
