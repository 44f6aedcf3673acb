package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progressEvery is how often a wait's progress line is redrawn.
const progressEvery = time.Second

// reporter writes redislock's own messages to stderr: warnings always,
// the steps of run with -v, and a progress line during long waits when
// stderr is a terminal (quiet otherwise).
type reporter struct {
	w       io.Writer
	verbose bool
	tty     bool
	mu      sync.Mutex
	line    bool // a progress line is on screen
}

func newReporter(verbose bool) *reporter {
	return &reporter{w: os.Stderr, verbose: verbose, tty: isTerminal(os.Stderr)}
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (r *reporter) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.line {
		fmt.Fprint(r.w, "\r\033[K")
		r.line = false
	}
	fmt.Fprintf(r.w, "redislock: "+format+"\n", args...)
}

func (r *reporter) warnf(format string, args ...any) { r.printf(format, args...) }

func (r *reporter) verbosef(format string, args ...any) {
	if r.verbose {
		r.printf(format, args...)
	}
}

// progress draws, on a terminal, a line that says how long the wait for key
// has lasted and who holds it (heldBy), until stop is called.
func (r *reporter) progress(key string, heldBy func() string) (stop func()) {
	if !r.tty {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned by stop
		defer wg.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			s := heldBy()
			r.mu.Lock()
			fmt.Fprintf(r.w, "\r\033[Kredislock: waiting %v for %q, %s", time.Since(start).Round(time.Second), key, s)
			r.line = true
			r.mu.Unlock()
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		r.mu.Lock()
		if r.line {
			fmt.Fprint(r.w, "\r\033[K")
			r.line = false
		}
		r.mu.Unlock()
	}
}
