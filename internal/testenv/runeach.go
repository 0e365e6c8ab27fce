package testenv

import (
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"syscall"
	"testing"
)

// RunEach runs every command to completion, at most parallel at a time,
// and fails the test with the output of any that failed. A wait that
// finds no child (ECHILD: a daemon or subreaper in the test's process
// reaped it first) counts as run. Each cmd.Process holds its pid after.
func RunEach(t testing.TB, parallel int, cmds []*exec.Cmd) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	errs := make(chan error, len(cmds))
	for _, c := range cmds {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if out, err := c.CombinedOutput(); err != nil && !errors.Is(err, syscall.ECHILD) {
				errs <- fmt.Errorf("%q: %v: %s", c.Args, err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
