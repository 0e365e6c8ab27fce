//go:build !linux

package procctx

import (
	"errors"

	"github.com/procsupervisor/supervisor/internal/events"
)

// DefaultArgvMax is the argv bound of a Reader given none.
const DefaultArgvMax = 32 << 10

// Reader reads nothing here: there is no /proc.
type Reader struct{}

// New returns a Reader that fills nothing.
func New(root string, argvMax int) *Reader { return &Reader{} }

// Fill reports that this system has no /proc to read.
func (r *Reader) Fill(ev *events.Event) error {
	return errors.New("exec context: no /proc on this system")
}
