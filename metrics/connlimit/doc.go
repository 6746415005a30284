// Package connlimit bounds the connections a listener holds: in all and
// per client address. A connection past a bound is closed at once instead
// of waiting in the accept queue, so clients that hold connections open
// cannot starve the others or exhaust the process's descriptors.
package connlimit
