package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// contentsPages are the pages a reader is sent to: the README, the
// benchmarks and every page of docs/. The changelog is read by version,
// newest first, and needs none.
func contentsPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(pages, "../../../README.md", "../../../BENCHMARKS.md")
}

// TestLongPagesHaveContents: a page over 400 lines opens with a contents
// section that lists every section it has, in order, each linked; one
// shorter may have one, and then it is current too.
// NEIGHWATCH_UPDATE_CONTENTS=1 writes them.
func TestLongPagesHaveContents(t *testing.T) {
	for _, p := range contentsPages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(b)
		long := strings.Count(doc, "\n") > contentsOver
		has := strings.Contains(doc, "\n"+contentsHeading+"\n")
		if !long && !has {
			continue
		}
		want := withContents(doc)
		if want == doc {
			continue
		}
		if os.Getenv("NEIGHWATCH_UPDATE_CONTENTS") == "1" {
			if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		name, _ := filepath.Rel("../../..", p)
		if !has {
			t.Errorf("%s is over %d lines and has no %q section (NEIGHWATCH_UPDATE_CONTENTS=1 go test ./internal/dev/shape -run Contents writes it)", name, contentsOver, contentsHeading)
		} else {
			t.Errorf("%s's contents do not list its sections as they are (NEIGHWATCH_UPDATE_CONTENTS=1 go test ./internal/dev/shape -run Contents writes them)", name)
		}
	}
}

// TestContents: the anchors a renderer makes, repeated headings, code
// fences, and a contents section written in place or before the first
// section.
func TestContents(t *testing.T) {
	seen := map[string]int{}
	for _, c := range [][2]string{
		{"eBPF: the tracer and the datapath", "ebpf-the-tracer-and-the-datapath"},
		{"Early windows (issue 63, part), measured 2026-12-07", "early-windows-issue-63-part-measured-2026-12-07"},
		{"`--tracer` and friends", "--tracer-and-friends"},
		{"Early windows (issue 63, part), measured 2026-12-07", "early-windows-issue-63-part-measured-2026-12-07-1"},
	} {
		if got := anchor(c[0], seen); got != c[1] {
			t.Errorf("anchor(%q) = %q, want %q", c[0], got, c[1])
		}
	}
	doc := "# T\n\nintro\n\n## A b\n\n```sh\n## not a section\n```\n\n## C\n"
	want := "# T\n\nintro\n\n## Contents\n\n- [A b](#a-b)\n- [C](#c)\n\n## A b\n\n```sh\n## not a section\n```\n\n## C\n"
	got := withContents(doc)
	if got != want {
		t.Fatalf("written:\n%s\nwant:\n%s", got, want)
	}
	if again := withContents(got); again != want {
		t.Errorf("written twice:\n%s", again)
	}
	stale := strings.Replace(want, "- [C](#c)\n", "", 1)
	if withContents(stale) != want {
		t.Errorf("a stale contents section not rewritten:\n%s", withContents(stale))
	}
}

// mdLink is a Markdown link's target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinksResolve: every link of the pages to a file of the tree
// names one that exists, and a link to a section names a heading the
// page has; a section moved from one page to another leaves no link
// behind.
func TestDocLinksResolve(t *testing.T) {
	for _, p := range contentsPages(t) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel("../../..", p)
		fence := false
		for n, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				path := p
				if file != "" {
					path = filepath.Join(filepath.Dir(p), file)
				}
				doc, err := os.ReadFile(path)
				if err != nil {
					if _, serr := os.Stat(path); serr != nil {
						t.Errorf("%s:%d: a link to %s, which is not in the tree", name, n+1, target)
					}
					continue
				}
				if frag != "" && strings.HasSuffix(path, ".md") && !anchors(string(doc))[frag] {
					in := "the page"
					if file != "" {
						in = file
					}
					t.Errorf("%s:%d: a link to %s, a section %s does not have", name, n+1, target, in)
				}
			}
		}
	}
}
