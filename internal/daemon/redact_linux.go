package daemon

import (
	"slices"
	"strings"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/store"
)

// redactClaim rewrites c's argv by rules before it is stored or shown:
// with Argv when no pattern rewrote it yet, with Again when one did (so
// that what a marker stands in never becomes something else). It
// reports whether c changed; with no rules it costs nothing.
func redactClaim(rules *redact.Rules, c *store.Claim) bool {
	if rules.Empty() {
		return false
	}
	f := rules.Argv
	if c.ArgsRedacted {
		f = rules.Again
	}
	argv, changed := f(c.Argv)
	if !changed || (c.ArgsRedacted && slices.Equal(argv, c.Argv)) {
		return false
	}
	c.Argv, c.ArgsRedacted = argv, true
	return true
}

// hideArgv0 returns err with every occurrence of the real argv[0] replaced
// by the one shown (redacted), for an error that goes where the claim's
// argv goes: its stored reason, the API answer, the launch's log line.
// The error is kept for errors.Is when nothing is hidden.
func hideArgv0(err error, real, shown string) error {
	if err == nil || real == shown || real == "" || !strings.Contains(err.Error(), real) {
		return err
	}
	return &hidden{msg: strings.ReplaceAll(err.Error(), real, shown), err: err}
}

// hidden is an error whose text is rewritten; Unwrap keeps the chain for
// errors.Is (whose callers never print the inner text).
type hidden struct {
	msg string
	err error
}

func (h *hidden) Error() string { return h.msg }
func (h *hidden) Unwrap() error { return h.err }

// treeArgs gives each live node of a tree its command line, read for
// that exact instance (local.Argv) and redacted by the daemon's patterns:
// the client shows these and reads no /proc of its own for the daemon's
// tree, so the patterns hold in `supervisor tree` too.
func (d *Daemon) treeArgs(nodes []api.TreeNode) {
	for i := range nodes {
		n := &nodes[i]
		if n.Exited {
			continue
		}
		n.Args, n.ArgsRedacted = d.redact.Argv(local.Argv(n.Pid, n.Token))
	}
}
