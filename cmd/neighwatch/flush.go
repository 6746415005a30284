package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// eventsFlush is how long an event line may wait in neighwatch events'
// buffer before it is written.
const eventsFlush = 100 * time.Millisecond

// flushingWriter buffers what is written to it and writes it out every
// interval, and at Close: a stream of many short lines costs a write a
// batch, not a write a line, and a line waits at most the interval.
type flushingWriter struct {
	mu   sync.Mutex
	w    *bufio.Writer
	err  error // the first write error: Write returns it from then on
	stop chan struct{}
	done chan struct{}
}

func newFlushingWriter(w io.Writer, interval time.Duration) *flushingWriter {
	f := &flushingWriter{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				return
			case <-t.C:
				f.mu.Lock()
				if f.err == nil && f.w.Buffered() > 0 {
					f.err = f.w.Flush()
				}
				f.mu.Unlock()
			}
		}
	}()
	return f
}

func (f *flushingWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.w.Write(p)
	f.err = err
	return n, err
}

// Close writes out what is buffered and stops the flushing.
func (f *flushingWriter) Close() error {
	close(f.stop)
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = f.w.Flush()
	}
	return f.err
}
