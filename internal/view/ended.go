package view

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
)

// Ended prints how a claim ended, on one line, in the words of list's
// RESULT column (Result) after its state: "j-... exited (3)",
// "j-... exited: killed by SIGKILL", "g-... released: wall clock",
// "g-... released: holder gone (2 unproven processes left)",
// "j-... retired: reason", "g-... dropped: FOREIGN: reason".
func Ended(w io.Writer, c api.Claim) {
	r := Result(c, time.Now())
	if !strings.HasPrefix(r, string(c.State)) {
		r = string(c.State) + ": " + r
	}
	fmt.Fprintf(w, "%s %s\n", Sanitize(c.ID), Sanitize(r))
}
