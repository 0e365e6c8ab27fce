package tracker

import (
	"github.com/procsupervisor/supervisor/internal/fallback"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// NewJudge builds the one judge every path uses (the CLI's local verify and
// kill, and the daemon): a pidfd-first judge for this boot that compares
// tokens of another precision across clocks (fallback.CompareAcross) and,
// when t is not nil, uses what t's graph watched and is named after t's
// mechanism. Building it anywhere else is how two answers to one question
// came about.
func NewJudge(boot procfs.BootID, t *Tracker) *verdict.Judge {
	j := &verdict.Judge{Boot: boot}
	if btime, err := fallback.ReadBootTime("/proc"); err == nil {
		j.Across = func(claim, observed token.Token) (token.Match, string) {
			return fallback.CompareAcross(claim, observed, btime)
		}
	}
	if t != nil {
		j.Observer = t
		j.Mechanism = string(t.Mechanism())
	}
	return j
}
