//go:build !linux

package local

import (
	"context"
	"errors"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/tracker"
)

func mapErr(err error) error {
	switch {
	case errors.Is(err, fallback.ErrNoProcess):
		return mark(ErrNoProcess, err)
	case errors.Is(err, fallback.ErrUnavailable):
		return mark(ErrUnavailable, err)
	}
	return err
}

// Start refuses: the event mechanisms run on Linux only.
func Start(ctx context.Context, mech string, onEvent func(*events.Event), rules *redact.Rules) (*tracker.Tracker, error) {
	return nil, mark(ErrUnavailable, errors.New("process events are watched on Linux only"))
}
