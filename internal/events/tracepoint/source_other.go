//go:build !linux || !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"fmt"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// Source is the eBPF event source; it exists only on little-endian Linux.
type Source struct{}

var _ events.Source = (*Source)(nil)

// Option configures New.
type Option func(*config)

type config struct{}

// WithExecPath asks for the exec context; it has no effect here.
func WithExecPath() Option { return func(*config) {} }

// WithArgvMax bounds the captured arguments; it has no effect here.
func WithArgvMax(int) Option { return func(*config) {} }

// New returns an error wrapping events.ErrUnavailable: eBPF tracepoints
// exist only on Linux, and the records are decoded as little-endian.
func New(boot procfs.BootID, opts ...Option) (*Source, error) {
	return nil, fmt.Errorf("tracepoint: eBPF needs little-endian Linux: %w", events.ErrUnavailable)
}

// Mechanism returns events.EBPF.
func (s *Source) Mechanism() events.Mechanism { return events.EBPF }

// Read returns events.ErrClosed.
func (s *Source) Read(ev *events.Event) error { return events.ErrClosed }

// Stats returns zero counts.
func (s *Source) Stats() events.Stats { return events.Stats{} }

// Close does nothing.
func (s *Source) Close() error { return nil }
