package tracker

import (
	"context"
	"fmt"
	"strings"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/events/proccon"
	"github.com/procsupervisor/supervisor/internal/events/tracepoint"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// Open opens the named mechanism, attached. For auto it returns the first
// that runs and, in tried, why each earlier one could not.
func Open(ctx context.Context, name string, boot procfs.BootID) (src events.Source, tried []string, err error) {
	return open(ctx, name, boot, 0)
}

// open is Open with the eBPF source's argv bound (0: its default).
func open(ctx context.Context, name string, boot procfs.BootID, argvMax int) (src events.Source, tried []string, err error) {
	open := map[string]func() (events.Source, error){
		// Exec events carry the process context, argv, the executable
		// and working directory: strings per exec, and execs are rare
		// next to forks and exits.
		"ebpf": func() (events.Source, error) {
			opts := []tracepoint.Option{tracepoint.WithExecPath()}
			if argvMax > 0 {
				opts = append(opts, tracepoint.WithArgvMax(argvMax))
			}
			return tracepoint.New(boot, opts...)
		},
		"netlink": func() (events.Source, error) { return proccon.New(boot) },
		"proc": func() (events.Source, error) {
			return fallback.NewPoller(ctx, fallback.NewProc("/proc"), fallback.PollerOptions{})
		},
		"ps": func() (events.Source, error) {
			return fallback.NewPoller(ctx, fallback.NewPS(fallback.PSOptions{Boot: &boot}), fallback.PollerOptions{})
		},
	}
	switch name {
	case "", "auto":
		for _, n := range []string{"ebpf", "netlink", "proc"} {
			s, err := open[n]()
			if err == nil {
				return s, tried, nil
			}
			tried = append(tried, fmt.Sprintf("%s: %v", n, err))
		}
		return nil, tried, fmt.Errorf("no mechanism can run: %s", strings.Join(tried, "; "))
	}
	f, ok := open[name]
	if !ok {
		return nil, nil, fmt.Errorf("%q (want one of %v): %w", name, Mechanisms, ErrUnknownMechanism)
	}
	s, err := f()
	if err != nil {
		return nil, nil, fmt.Errorf("mechanism %s cannot run: %w", name, err)
	}
	return s, nil, nil
}
