//go:build !linux

package actions

import (
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/pidfd"
)

// signalAs sends sig to each of hs. Only the Linux daemon acts for
// another uid; elsewhere the caller signals with its own rights.
func signalAs(_ uint32, hs []*pidfd.Handle, sig unix.Signal) []error {
	errs := make([]error, len(hs))
	for i, h := range hs {
		errs[i] = h.Signal(sig)
	}
	return errs
}
