// Package quote writes a value someone gave (a flag, a config line, a
// control request) into an error message: quoted, and cut to a bounded
// length, so one refusal stays one short line however long the input.
package quote

import (
	"strconv"
	"unicode/utf8"
)

// Max is how many bytes of a value a message shows.
const Max = 64

// Input quotes s as Go would (%q). A value over Max bytes shows its first
// Max bytes (cut at a rune boundary) and its length: "abc..." (70000 bytes).
func Input(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	cut := Max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]+"...") + " (" + strconv.Itoa(len(s)) + " bytes)"
}
