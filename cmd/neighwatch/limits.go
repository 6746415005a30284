package main

import (
	"fmt"
	"math"
	"time"
)

// A limit is one numeric flag's documented range. The agent refuses a
// value outside it with one line and exit 2, instead of running out of
// memory for a typo or silently turning a feature off.
type limit struct {
	flag  string
	check func() error
}

func durationIn(flag string, v *time.Duration, min, max time.Duration, zeroOff bool) limit {
	return limit{flag, func() error {
		if zeroOff && *v == 0 {
			return nil
		}
		if *v < min || *v > max {
			off := ""
			if zeroOff {
				off = ", or 0 to turn it off"
			}
			return fmt.Errorf("--%s %v is out of range: want %v to %v%s", flag, *v, min, max, off)
		}
		return nil
	}}
}

func intIn(flag string, v *int, min, max int) limit {
	return limit{flag, func() error {
		if *v < min || *v > max {
			return fmt.Errorf("--%s %d is out of range: want %d to %d", flag, *v, min, max)
		}
		return nil
	}}
}

func floatIn(flag string, v *float64, min, max float64) limit {
	return limit{flag, func() error {
		if math.IsNaN(*v) || math.IsInf(*v, 0) || *v < min || *v > max {
			return fmt.Errorf("--%s %v is out of range: want a number from %g to %g", flag, *v, min, max)
		}
		return nil
	}}
}

// checkLimits returns the first value out of its range.
func checkLimits(ls []limit) error {
	for _, l := range ls {
		if err := l.check(); err != nil {
			return err
		}
	}
	return nil
}
