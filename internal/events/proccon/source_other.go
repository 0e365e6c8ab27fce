//go:build !linux

package proccon

import (
	"fmt"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// Source is not available on this system: the proc connector is Linux only.
type Source struct{}

// New returns an error wrapping events.ErrUnavailable: the proc connector
// is Linux only.
func New(boot procfs.BootID) (*Source, error) {
	return nil, fmt.Errorf("%w: proc connector: Linux only", events.ErrUnavailable)
}

// Mechanism returns events.Netlink.
func (s *Source) Mechanism() events.Mechanism { return events.Netlink }

// Read returns events.ErrClosed.
func (s *Source) Read(ev *events.Event) error { return events.ErrClosed }

// Stats returns zero counters.
func (s *Source) Stats() events.Stats { return events.Stats{} }

// Close does nothing.
func (s *Source) Close() error { return nil }
