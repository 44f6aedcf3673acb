package main

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// waitFlag is --wait: seconds as flock(1) takes them (a plain number,
// fractions allowed), or a Go duration (1m30s). Not given: wait as long as
// it takes; 0: one attempt.
type waitFlag struct {
	d   time.Duration
	set bool
}

func (w *waitFlag) String() string {
	if !w.set {
		return ""
	}
	return w.d.String()
}

func (w *waitFlag) Type() string { return "SECONDS" }

func (w *waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, perr := strconv.ParseFloat(s, 64)
		if perr != nil || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return fmt.Errorf("want seconds (a number, fractions allowed) or a duration such as 1m30s")
		}
		if secs > math.MaxInt64/float64(time.Second) {
			return fmt.Errorf("at most %v", time.Duration(math.MaxInt64))
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 {
		return fmt.Errorf("must not be negative")
	}
	w.d, w.set = d, true
	return nil
}
