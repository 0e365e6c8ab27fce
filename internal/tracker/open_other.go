//go:build !linux

package tracker

import (
	"context"
	"fmt"
	"runtime"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// open is Open; the argv bound is for the eBPF source, Linux only.
func open(ctx context.Context, name string, boot procfs.BootID, _ int) (events.Source, []string, error) {
	return Open(ctx, name, boot)
}

// Open opens the named mechanism. Off Linux only polling runs: sysctl
// (auto) or ps.
func Open(ctx context.Context, name string, boot procfs.BootID) (events.Source, []string, error) {
	switch name {
	case "", "auto":
		s, err := fallback.NewPoller(ctx, fallback.NewSysctl(), fallback.PollerOptions{})
		if err == nil {
			return s, nil, nil
		}
		tried := []string{fmt.Sprintf("sysctl: %v", err)}
		s, err = fallback.NewPoller(ctx, fallback.NewPS(fallback.PSOptions{}), fallback.PollerOptions{})
		if err != nil {
			return nil, tried, fmt.Errorf("no mechanism can run: sysctl: %v; ps: %w", tried[0], err)
		}
		return s, tried, nil
	case "ps":
		s, err := fallback.NewPoller(ctx, fallback.NewPS(fallback.PSOptions{}), fallback.PollerOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("mechanism ps cannot run: %w", err)
		}
		return s, nil, nil
	case "ebpf", "netlink", "proc":
		return nil, nil, fmt.Errorf("mechanism %s cannot run on %s: %w", name, runtime.GOOS, events.ErrUnavailable)
	}
	return nil, nil, fmt.Errorf("%q (want one of %v): %w", name, Mechanisms, ErrUnknownMechanism)
}
