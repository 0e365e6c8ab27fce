package verdict

import (
	"errors"
	"fmt"
	"time"

	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Observation is what a continuous observer (the lineage graph fed by
// kernel events) knows about a claimed instance, beyond its token.
type Observation struct {
	// Known: the observer has a record of the claimed instance.
	Known bool
	// Continuous: the observer watched the pid without a gap from before the
	// claimed instance started (or from when it was admitted) until now, so
	// a reissue would have been seen.
	Continuous bool
	// Exited: the observer saw the claimed instance exit.
	Exited bool
	// ExitedAt is when it exited, if Exited.
	ExitedAt time.Time
	// ExitInferred: the exit was not seen but inferred, from the pid
	// missing in a snapshot (the polling mechanisms); ExitedAt is then
	// when it was found missing.
	ExitInferred bool
	// Reissued is the token of a later instance the observer saw take the pid.
	Reissued token.Token
	// Mechanism names the observer's event source.
	Mechanism string
}

// Observer is the lineage graph as the judge uses it.
type Observer interface {
	Observe(pid int32, claim token.Token) Observation
}

// Judge decides verdicts on Linux by binding a pidfd first. The zero Judge
// is not usable: Boot must be the current boot id.
type Judge struct {
	Boot procfs.BootID
	// Mechanism names what decides when no observer does; "pidfd" if empty.
	Mechanism string
	// Observer, when set, proves what the token alone cannot.
	Observer Observer
	// Across, when set, compares a claim whose token has another precision
	// than the pidfd's (a seconds token from ps, microseconds from macOS)
	// with the observed ticks token; token.Compare calls them Unproven.
	Across func(claim, observed token.Token) (token.Match, string)
}

// New returns a Judge for this boot.
func New() (*Judge, error) {
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		return nil, err
	}
	return &Judge{Boot: boot}, nil
}

func (j *Judge) mechanism() string {
	if j.Mechanism != "" {
		return j.Mechanism
	}
	return "pidfd"
}

// Judge returns the verdict on the claim (pid, claim token).
func (j *Judge) Judge(pid int32, claim token.Token) Verdict {
	v, h := j.Bind(pid, claim)
	if h != nil {
		h.Close()
	}
	return v
}

// Bind judges the claim and, when the verdict is Owned, returns a handle bound
// to exactly the judged instance; the caller closes it. For any other verdict
// the handle is nil: there is nothing the caller may signal.
func (j *Judge) Bind(pid int32, claim token.Token) (Verdict, *pidfd.Handle) {
	v := Verdict{Pid: pid, Token: claim, Mechanism: j.mechanism()}
	tok := claim
	if tok.IsZero() {
		return v.with(Unverifiable, "no token: a pid alone proves nothing"), nil
	}
	if err := pidfd.CheckPid(int64(pid)); err != nil {
		return v.with(Unverifiable, err.Error()), nil
	}
	h, err := pidfd.Open(pid, j.Boot)
	if err != nil {
		var te *pidfd.ThreadError
		switch {
		case errors.As(err, &te):
			return v.with(Foreign, fmt.Sprintf("pid %d is now a thread of process %d, not the claimed process", te.Tid, te.Tgid)), nil
		case errors.Is(err, pidfd.ErrGone):
			if tok.Boot != j.Boot {
				return v.with(Gone, "token is from another boot, and no process holds the pid"), nil
			}
			return j.gone(v, pid, tok), nil
		case errors.Is(err, pidfd.ErrResource):
			v.Transient = true
			return v.with(Unverifiable, "cannot inspect the process now (the judge ran short of a resource; ask again): "+err.Error()), nil
		}
		return v.with(Unverifiable, "cannot inspect the process: "+err.Error()), nil
	}
	observed := h.Token()
	v.Observed = observed
	m, why := token.Compare(tok, observed)
	if m == token.Unproven && tok.Prec != observed.Prec && j.Across != nil {
		m, why = j.Across(tok, observed)
		if m == token.Same && tok.Prec != token.Micro {
			m = token.Unproven // only a token fine enough proves identity
		}
	}
	switch m {
	case token.OtherBoot:
		h.Close()
		return v.with(Foreign, "token is from another boot; the pid is held by a process of this boot"), nil
	case token.Different:
		h.Close()
		return j.foreign(v, pid, tok, why), nil
	case token.Same:
		if h.Zombie() {
			h.Close()
			return v.with(Gone, fmt.Sprintf("exited; a zombie awaiting reaping by its parent %d", h.Stat().PPid)), nil
		}
		return v.with(Owned, why), h
	}
	// Unproven by the token: only continuous observation can prove it.
	if j.Observer != nil {
		o := j.Observer.Observe(pid, tok)
		if o.Known && o.Continuous && !o.Exited && o.Reissued.IsZero() {
			if observed.Start == tok.Start {
				v.Mechanism = o.Mechanism
				if h.Zombie() {
					h.Close()
					return v.with(Gone, "exited; a zombie awaiting reaping"), nil
				}
				return v.with(Owned, "start time matches and the pid was watched without a gap since the claimed instance started"), h
			}
		}
		if o.Known && (o.Exited || !o.Reissued.IsZero()) {
			h.Close()
			v.Mechanism = o.Mechanism
			return v.with(Foreign, reissueReason(pid, tok, o)), nil
		}
	}
	h.Close()
	return v.with(Unverifiable, why), nil
}

func (j *Judge) gone(v Verdict, pid int32, tok token.Token) Verdict {
	if j.Observer != nil {
		if o := j.Observer.Observe(pid, tok); o.Known && o.Exited {
			v.Mechanism = o.Mechanism
			if o.ExitInferred {
				return v.with(Gone, fmt.Sprintf("found gone by %s (the pid missing from a snapshot); no process holds the pid", o.ExitedAt.UTC().Format(time.RFC3339Nano)))
			}
			return v.with(Gone, fmt.Sprintf("exit observed at %s; no process holds the pid", o.ExitedAt.UTC().Format(time.RFC3339Nano)))
		}
	}
	return v.with(Gone, "no process holds the pid")
}

func (j *Judge) foreign(v Verdict, pid int32, tok token.Token, why string) Verdict {
	if j.Observer != nil {
		if o := j.Observer.Observe(pid, tok); o.Known && (o.Exited || !o.Reissued.IsZero()) {
			return v.with(Foreign, reissueReason(pid, tok, o)+"; "+why)
		}
	}
	return v.with(Foreign, why)
}

func reissueReason(pid int32, tok token.Token, o Observation) string {
	if o.Exited {
		return fmt.Sprintf("pid reissued: exit of %d@%s observed at %s", pid, tok, o.ExitedAt.UTC().Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("pid reissued: %d@%s observed taking over from %s", pid, o.Reissued, tok)
}

func (v Verdict) with(r Result, reason string) Verdict {
	v.Result = r
	v.Reason = reason
	return v
}
