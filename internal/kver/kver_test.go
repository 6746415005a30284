package kver

import (
	"fmt"
	"testing"
)

// TestAtLeast: the running kernel is at least 0.0 and at least its own
// major.minor, and never at least the next major.
func TestAtLeast(t *testing.T) {
	ok, rel, err := AtLeast(0, 0)
	if !ok || rel == "" || err != nil {
		t.Fatalf("AtLeast(0, 0) = %v, %q, %v", ok, rel, err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := AtLeast(major, minor); !ok {
		t.Errorf("release %s: not at least %d.%d", rel, major, minor)
	}
	if ok, _, _ := AtLeast(major+1, 0); ok {
		t.Errorf("release %s: at least %d.0", rel, major+1)
	}
}
