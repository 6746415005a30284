package main

import (
	"fmt"
	"strings"
	"unicode"
)

// A page of the project's documents over contentsOver lines opens with a
// "## Contents" section that lists its sections (its "## " headings), each
// a link to its anchor, so a reader finds the part they came for; short
// pages need none. TestLongPagesHaveContents holds it.
const contentsOver = 400

const contentsHeading = "## Contents"

// heading is one of a page's headings: its level (the count of its #)
// and its text.
type heading struct {
	level int
	text  string
}

// headings returns a page's headings, outside fenced code.
func headings(doc string) []heading {
	var out []heading
	fence := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		t := strings.TrimLeft(l, "#")
		if !strings.HasPrefix(t, " ") {
			continue
		}
		out = append(out, heading{len(l) - len(t), strings.TrimSpace(t)})
	}
	return out
}

// sections returns a page's "## " headings, outside fenced code, but its
// contents section.
func sections(doc string) []string {
	var out []string
	for _, h := range headings(doc) {
		if h.level == 2 && "## "+h.text != contentsHeading {
			out = append(out, h.text)
		}
	}
	return out
}

// anchor is the fragment a Markdown renderer (GitHub's) gives a heading:
// lower case, letters, digits, spaces, hyphens and underscores kept, each
// space a hyphen; a repeated one gets -1, -2 and so on.
func anchor(heading string, seen map[string]int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	a := b.String()
	if n := seen[a]; n > 0 {
		seen[a] = n + 1
		return fmt.Sprintf("%s-%d", a, n)
	}
	seen[a] = 1
	return a
}

// contents is the contents section a page should have.
func contents(doc string) string {
	var b strings.Builder
	b.WriteString(contentsHeading + "\n\n")
	seen := map[string]int{}
	for _, h := range sections(doc) {
		fmt.Fprintf(&b, "- [%s](#%s)\n", strings.ReplaceAll(h, "`", ""), anchor(h, seen))
	}
	return b.String()
}

// withContents returns the page with its contents section written: in
// place of the one it has, or else before its first section.
func withContents(doc string) string {
	want := contents(doc)
	lines := strings.SplitAfter(doc, "\n")
	start, end := -1, len(lines)
	for i, l := range lines {
		t := strings.TrimRight(l, "\n")
		switch {
		case start < 0 && t == contentsHeading:
			start = i
		case start >= 0 && strings.HasPrefix(t, "## "):
			end = i
		}
		if start >= 0 && end < len(lines) {
			break
		}
	}
	if start < 0 {
		for i, l := range lines {
			if strings.HasPrefix(l, "## ") {
				return strings.Join(lines[:i], "") + want + "\n" + strings.Join(lines[i:], "")
			}
		}
		return doc
	}
	return strings.Join(lines[:start], "") + want + "\n" + strings.Join(lines[end:], "")
}

// anchors returns every heading's anchor on a page, at any level.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range headings(doc) {
		out[anchor(h.text, seen)] = true
	}
	return out
}
