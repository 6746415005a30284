package feed

import (
	"testing"
	"time"
)

// TestSampler: no need, no hooks; with need, window out of every period,
// the first window at once; the duty cycle over many periods is
// window/period.
func TestSampler(t *testing.T) {
	s := sampler{window: time.Second, period: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	if on, _ := s.step(t0, false, false); on {
		t.Fatal("attached with nothing to watch")
	}
	if on, wake := s.step(t0, true, false); !on || wake != time.Second {
		t.Fatalf("need appeared: on=%v wake=%v, want on for the window", on, wake)
	}
	if on, _ := s.step(t0.Add(500*time.Millisecond), true, false); !on {
		t.Fatal("detached inside the window")
	}
	if on, _ := s.step(t0.Add(time.Second), true, false); on {
		t.Fatal("attached after the window")
	}
	if on, _ := s.step(t0.Add(9*time.Second), true, false); on {
		t.Fatal("attached before the period ended")
	}
	if on, _ := s.step(t0.Add(10*time.Second), true, false); !on {
		t.Fatal("not attached at the next period")
	}
	if on, _ := s.step(t0.Add(10500*time.Millisecond), false, false); on {
		t.Fatal("still attached when the need went away")
	}
	if on, _ := s.step(t0.Add(11*time.Second), true, false); !on {
		t.Fatal("a new need does not start a window at once")
	}

	// Duty cycle: simulate following the sampler's own wake-ups.
	s = sampler{window: time.Second, period: 30 * time.Second}
	now, attached := t0, time.Duration(0)
	end := now.Add(time.Hour)
	for now.Before(end) {
		on, wake := s.step(now, true, false)
		if on {
			attached += wake
		}
		now = now.Add(wake)
	}
	if d := attached.Seconds() / time.Hour.Seconds(); d < 1.0/30-0.001 || d > 1.0/30+0.001 {
		t.Fatalf("duty cycle %.4f, want %.4f", d, 1.0/30)
	}

	// window >= period: always on while needed.
	s = sampler{window: time.Second, period: time.Second}
	for i := range 5 {
		if on, _ := s.step(t0.Add(time.Duration(i)*time.Second), true, false); !on {
			t.Fatal("window == period must keep the hooks attached")
		}
	}
}

// TestSamplerEarlyWindows: an entry that turns stale-long between the
// period's windows is watched at once, by an early window, while the
// budget lasts (two windows, and one more every period); the period's own
// windows stay where they were; and however often entries turn, the hooks
// are attached at most twice window/period of the time.
func TestSamplerEarlyWindows(t *testing.T) {
	s := sampler{window: time.Second, period: 30 * time.Second}
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration, fresh bool) bool {
		on, _ := s.step(t0.Add(d), true, fresh)
		return on
	}
	if !at(0, false) {
		t.Fatal("no window when the need appeared")
	}
	if at(5*time.Second, false) {
		t.Fatal("attached between windows with nothing new")
	}
	if !at(6*time.Second, true) {
		t.Fatal("an entry turned stale-long between windows: no early window")
	}
	if at(7*time.Second, false) {
		t.Fatal("the early window lasted past its length")
	}
	if !at(8*time.Second, true) {
		t.Fatal("a second early window refused with the budget holding two")
	}
	if at(12*time.Second, true) {
		t.Fatal("a third early window within a period: the budget holds two")
	}
	if at(20*time.Second, true) {
		t.Fatal("an early window with less than a window of budget (about half)")
	}
	if !at(30*time.Second, false) {
		t.Fatal("the period's own window moved by the early ones")
	}
	if !at(40*time.Second, true) {
		t.Fatal("no early window once the budget grew back a window")
	}

	// Entries turning stale-long all the time: twice the duty at most.
	s = sampler{window: time.Second, period: 30 * time.Second}
	now, attached := t0, time.Duration(0)
	end := now.Add(time.Hour)
	for now.Before(end) {
		on, wake := s.step(now, true, true)
		if on {
			attached += wake
		}
		now = now.Add(wake)
	}
	if d := attached.Seconds() / time.Hour.Seconds(); d < 1.9/30 || d > 2.0/30+0.001 {
		t.Fatalf("duty cycle %.4f with an entry turning every step, want about %.4f and never more", d, 2.0/30)
	}
}
