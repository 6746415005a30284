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
	if on, _ := s.step(t0, false); on {
		t.Fatal("attached with nothing to watch")
	}
	if on, wake := s.step(t0, true); !on || wake != time.Second {
		t.Fatalf("need appeared: on=%v wake=%v, want on for the window", on, wake)
	}
	if on, _ := s.step(t0.Add(500*time.Millisecond), true); !on {
		t.Fatal("detached inside the window")
	}
	if on, _ := s.step(t0.Add(time.Second), true); on {
		t.Fatal("attached after the window")
	}
	if on, _ := s.step(t0.Add(9*time.Second), true); on {
		t.Fatal("attached before the period ended")
	}
	if on, _ := s.step(t0.Add(10*time.Second), true); !on {
		t.Fatal("not attached at the next period")
	}
	if on, _ := s.step(t0.Add(10500*time.Millisecond), false); on {
		t.Fatal("still attached when the need went away")
	}
	if on, _ := s.step(t0.Add(11*time.Second), true); !on {
		t.Fatal("a new need does not start a window at once")
	}

	// Duty cycle: simulate following the sampler's own wake-ups.
	s = sampler{window: time.Second, period: 30 * time.Second}
	now, attached := t0, time.Duration(0)
	end := now.Add(time.Hour)
	for now.Before(end) {
		on, wake := s.step(now, true)
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
		if on, _ := s.step(t0.Add(time.Duration(i)*time.Second), true); !on {
			t.Fatal("window == period must keep the hooks attached")
		}
	}
}
