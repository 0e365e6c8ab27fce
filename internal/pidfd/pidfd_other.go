//go:build !linux

package pidfd

import (
	"syscall"
	"time"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Handle is not available on this system.
type Handle struct{}

// Open returns ErrNotSupported: this system has no pidfd.
func Open(pid int32, boot procfs.BootID) (*Handle, error) {
	if err := CheckPid(int64(pid)); err != nil {
		return nil, err
	}
	return nil, ErrNotSupported
}

func (h *Handle) Pid() int32                      { return 0 }
func (h *Handle) Token() token.Token              { return token.Token{} }
func (h *Handle) Stat() procfs.Stat               { return procfs.Stat{} }
func (h *Handle) Zombie() bool                    { return false }
func (h *Handle) Signal(sig syscall.Signal) error { return ErrNotSupported }
func (h *Handle) Exited() bool                    { return false }
func (h *Handle) Wait(d time.Duration) bool       { return false }
func (h *Handle) Fd() int                         { return -1 }
func (h *Handle) Close() error                    { return nil }
