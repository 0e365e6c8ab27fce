package view

import (
	"fmt"
	"io"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
)

// Ended prints how a claim ended, on one line: "j-... exited (3)",
// "j-... exited (signal 9)", "g-... released: nothing left alive",
// "g-... released: 2 survivors, 1 unproven", "j-... retired: reason".
func Ended(w io.Writer, c api.Claim) {
	fmt.Fprintf(w, "%s %s", c.ID, c.State)
	switch {
	case c.State == store.Exited && c.ExitSignal != 0:
		fmt.Fprintf(w, " (signal %d)", c.ExitSignal)
	case c.State == store.Exited && c.ExitCode != nil:
		fmt.Fprintf(w, " (%d)", *c.ExitCode)
	case c.Release != nil && c.Release.Dead:
		fmt.Fprint(w, ": nothing left alive")
	case c.Release != nil:
		fmt.Fprintf(w, ": %d survivors, %d unproven", len(c.Release.Survivors), len(c.Release.Unproven))
	case c.RetiredReason != "":
		fmt.Fprintf(w, ": %s", Sanitize(c.RetiredReason))
	case c.LastVerdict != nil:
		fmt.Fprintf(w, ": %s (%s)", c.LastVerdict.Result, Sanitize(c.LastVerdict.Reason))
	}
	fmt.Fprintln(w)
}
