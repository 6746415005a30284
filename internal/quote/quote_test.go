package quote

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInput(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", `""`},
		{"on", `"on"`},
		{"a\nb", `"a\nb"`},
		{strings.Repeat("x", Max), `"` + strings.Repeat("x", Max) + `"`},
		{strings.Repeat("x", Max+1), `"` + strings.Repeat("x", Max) + `..." (65 bytes)`},
		// A rune across the cut is left out whole.
		{strings.Repeat("x", Max-1) + "é" + "y", `"` + strings.Repeat("x", Max-1) + `..." (66 bytes)`},
	} {
		if got := Input(c.in); got != c.want {
			t.Errorf("Input(%.80q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func FuzzInput(f *testing.F) {
	f.Add("dry-run")
	f.Add(strings.Repeat("é", 100))
	f.Fuzz(func(t *testing.T, s string) {
		got := Input(s)
		if len(got) > 4*Max+32 || strings.ContainsAny(got, "\n\r") {
			t.Fatalf("Input of %d bytes: %d bytes, %q", len(s), len(got), got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Input cut a rune: %q", got)
		}
	})
}
