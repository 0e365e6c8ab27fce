package actions

import (
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Member is a process by identity, (pid, token), and, when it was reported
// instead of signalled, why.
type Member = token.Instance

// Outcome reports a teardown.
type Outcome struct {
	// Verdict is the ownership verdict on the root that gated the teardown.
	Verdict verdict.Verdict `json:"verdict"`
	// Acted is false when the verdict forbade signalling anything.
	Acted bool `json:"acted"`
	// Dead is true when every targeted member is gone.
	Dead bool `json:"dead"`
	// Escalated is true when SIGKILL was needed.
	Escalated bool `json:"escalated"`
	// Targeted lists the verified members the teardown acted on.
	Targeted []Member `json:"targeted"`
	// Survivors lists verified members still alive after SIGKILL.
	Survivors []Member `json:"survivors"`
	// Unproven lists processes that looked related (a live group under a
	// gone leader, a descendant whose identity could not be bound) or were
	// members the rules forbid signalling (protected, another uid's), each
	// with its reason: reported, never signalled.
	Unproven []Member `json:"unproven,omitempty"`
	// Signals counts signals sent, by name.
	Signals map[string]int `json:"signals"`
	// SignalsFailed counts signals the kernel refused (each was reported
	// to OnSignal like those sent).
	SignalsFailed int `json:"signals_failed,omitempty"`
	// Mechanism names how members were found (observed lineage or /proc
	// ancestry) and how the tree was stopped.
	Mechanism string `json:"mechanism"`
	// Incomplete, when set, says why the members found may not be the
	// whole tree: a member the finder did not watch without a gap from
	// its birth could have left a child unseen (one whose parent exited
	// is linked to nothing). Never set when the claim's cgroup was
	// searched, which holds every descendant whatever its parent.
	Incomplete string `json:"incomplete,omitempty"`
	// Partial is true when candidates were left unbound for a want of
	// descriptors or memory (the principal's budget spent, or the
	// daemon's own: pidfd.Short): they live on unsignalled, listed in
	// Unproven, and a later teardown may bind them. Dead says nothing of
	// them.
	Partial bool `json:"partial,omitempty"`
	// Error describes a fault that stopped the teardown early.
	Error string `json:"error,omitempty"`
}
