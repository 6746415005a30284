package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/mutation"
)

// rules checks every rule of the ledger (or those named by only): each
// break alone, jobs at a time.
func rules(ctx context.Context, ledger, only string, o mutation.CheckOptions, jobs int) error {
	all, err := mutation.ReadRules(ledger)
	if err != nil {
		return err
	}
	picked := all
	if only != "" {
		picked = nil
		for _, id := range strings.Split(only, ",") {
			i := slices.IndexFunc(all, func(r mutation.Rule) bool { return r.ID == id })
			if i < 0 {
				return fmt.Errorf("--only: no rule %q in %s", id, ledger)
			}
			picked = append(picked, all[i])
		}
	}
	mode := "the named tests"
	if o.Whole {
		mode = "every test of each rule's packages"
	}
	fmt.Printf("nwmutants rules: %d rules of %s, each break alone against %s, in %s, %d at a time\n", len(picked), ledger, mode, o.Root, jobs)
	start := time.Now()
	width := 0
	for _, r := range picked {
		width = max(width, len(r.ID))
	}
	results := make([]mutation.Result, len(picked))
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range max(1, jobs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				res := mutation.Check(ctx, picked[i], o)
				results[i] = res
				mu.Lock()
				fmt.Printf("%-11s %-*s %5.1fs  %s\n", res.Verdict, width, res.Rule.ID, res.Took.Seconds(), res.Detail)
				mu.Unlock()
			}
		}()
	}
	for i := range picked {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	byArea := map[string][2]int{}
	var areas []string
	var open []string
	for _, r := range results {
		a := byArea[r.Rule.Area]
		if a == [2]int{} && !slices.Contains(areas, r.Rule.Area) {
			areas = append(areas, r.Rule.Area)
		}
		a[1]++
		if r.Verdict == mutation.Caught {
			a[0]++
		} else {
			open = append(open, fmt.Sprintf("%s %s (%s:%d): %s", r.Verdict, r.Rule.ID, ledger, r.Rule.Line, r.Detail))
		}
		byArea[r.Rule.Area] = a
	}
	fmt.Println()
	fmt.Println("| area | breaks caught | rules |")
	fmt.Println("|---|---|---|")
	caught := 0
	for _, a := range areas {
		fmt.Printf("| %s | %d | %d |\n", a, byArea[a][0], byArea[a][1])
		caught += byArea[a][0]
	}
	fmt.Printf("| all | %d | %d |\n", caught, len(results))
	fmt.Printf("nwmutants rules: %d of %d breaks caught in %v\n", caught, len(results), time.Since(start).Round(time.Second))
	if len(open) > 0 {
		for _, s := range open {
			fmt.Println(s)
		}
		return fmt.Errorf("%d of %d rules not guarded: each must have a break that its tests catch", len(open), len(results))
	}
	return nil
}

// writeSummary rewrites the ledger's table of rules by area.
func writeSummary(ledger string) error {
	rs, err := mutation.ReadRules(ledger)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(ledger)
	if err != nil {
		return err
	}
	out, err := mutation.WithSummary(string(b), mutation.SummaryTable(rs))
	if err != nil {
		return err
	}
	return os.WriteFile(ledger, []byte(out), 0o644)
}
