package lab

import (
	"os"
	"testing"
)

// WriteFile writes body to path (mode 0644) or fails the test.
func WriteFile(tb testing.TB, path, body string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		tb.Fatal(err)
	}
}
