//go:build !darwin

package fallback

import (
	"context"
	"fmt"

	"github.com/procsupervisor/supervisor/internal/events"
)

// Sysctl snapshots the process table through sysctl kern.proc.all; it runs
// only on macOS.
type Sysctl struct{}

// NewSysctl returns a kern.proc snapshotter; on this OS its Snapshot fails.
func NewSysctl() *Sysctl { return &Sysctl{} }

// Mechanism returns events.SysctlPoll.
func (s *Sysctl) Mechanism() events.Mechanism { return events.SysctlPoll }

// Snapshot fails with an error wrapping events.ErrUnavailable.
func (s *Sysctl) Snapshot(context.Context) (*Snapshot, error) {
	return nil, fmt.Errorf("sysctl kern.proc: macOS only: %w", events.ErrUnavailable)
}
