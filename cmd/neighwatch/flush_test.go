package main

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the flusher's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int // writes
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.b.Write(p)
}

func (s *syncBuffer) read() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String(), s.n
}

// TestFlushingWriter: many lines go out in few writes, a line waits for
// the next flush and no longer, Close writes out the rest.
func TestFlushingWriter(t *testing.T) {
	var out syncBuffer
	f := newFlushingWriter(&out, 10*time.Millisecond)
	for range 1000 {
		if _, err := f.Write([]byte("an event line\n")); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, n := out.read()
		if len(got) == 1000*len("an event line\n") {
			if n > 10 {
				t.Errorf("1,000 lines took %d writes: not buffered", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a buffered line never written by the flusher: %d bytes out", len(got))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := f.Write([]byte("last\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := out.read(); !bytes.HasSuffix([]byte(got), []byte("last\n")) {
		t.Errorf("Close did not write out the rest: %q", got[max(0, len(got)-20):])
	}
}

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestFlushingWriterKeepsTheError: once the output fails, writes say so
// (neighwatch events ends rather than reading on into nothing).
func TestFlushingWriterKeepsTheError(t *testing.T) {
	f := newFlushingWriter(errWriter{}, time.Millisecond)
	_, _ = f.Write([]byte("a line\n"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := f.Write([]byte("x\n")); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes still succeed after the output failed")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := f.Close(); err == nil {
		t.Error("Close after a failed output returned nil")
	}
}
