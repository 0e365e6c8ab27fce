package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/client"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
	"github.com/procsupervisor/supervisor/internal/view"
)

func init() {
	register("token", "print the start token of a live process", runToken,
		`token PID

Prints the start token of process PID on one line. Exit codes: 0 printed,
64 bad arguments (not a pid, a thread id), 66 no such process (or it has
exited), 69 not supported on this system, 70 other errors.`)
	register("verify", "judge a claim (PID, TOKEN): OWNED, FOREIGN, GONE or UNVERIFIABLE", runVerify,
		`verify PID TOKEN [--mechanism M] [--socket PATH] [--json]

Prints the verdict word, its reason and who judged on one line (--json: one
object with pid, token, verdict, reason and mechanism). The daemon judges
when its socket answers (its lineage graph has watched the host);
otherwise, or with --mechanism (that event source then runs for the
verdict), a pidfd bound to PID is judged here: its start time
and pidfs inode against the token. The mechanism says which ("daemon:ebpf",
"local:pidfd"). Exit codes: 0 OWNED, 1 FOREIGN, 2 GONE, 3 UNVERIFIABLE,
64 bad arguments, 65 malformed token, 75 busy, 77 refused (the daemon or its
socket), 70 other errors.`)
	register("kill", "tear down a claimed process and its verified descendants", runKill,
		`kill PID TOKEN [--grace DURATION] [--mechanism M | --held-only] [--socket PATH] [--json]

Judges the claim and, only if it is OWNED, stops the tree (SIGSTOP), sends
SIGTERM and SIGCONT, waits the grace period, sends SIGKILL to what is left,
and reports survivors. Nothing that is not proven to be the claimed process
or its descendant is ever signalled. The daemon does it when it holds the
claim (interrupted, the teardown goes on there: exit 130); this command acts
by itself, with the caller's rights, only when no daemon answers, the daemon
does not hold the claim, or --mechanism is given, and says so on stderr;
with --held-only never (a program that must act only on what it handed the
daemon: a process it never launched or admitted is then refused, 66). A
refusal of the daemon is never followed by a local teardown. Exit codes:
0 everything targeted is dead, 1 the verdict forbade acting, 2 survivors
remain, 64 bad arguments, 65 malformed token, 66 not held (--held-only),
69 no daemon and no local
mechanism, 75 busy, 77 refused (another user's claim, the daemon or its ancestors,
the socket), 130 interrupted, 70 other errors.`)
}

// parsePid parses a process id argument, refusing what can never be one.
func parsePid(s string) (int32, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fail(exitUsage, "%q is not a process id", s)
	}
	if err := pidfd.CheckPid(v); err != nil {
		return 0, fail(exitUsage, "%v", err)
	}
	return int32(v), nil
}

// parseClaim parses the arguments PID TOKEN: the only place the CLI turns
// a token's text into a token.
func parseClaim(pos []string) (int32, token.Token, error) {
	pid, err := parsePid(pos[0])
	if err != nil {
		return 0, token.Token{}, err
	}
	tok, err := token.Parse(pos[1])
	if err != nil {
		return 0, token.Token{}, fail(exitData, "%v", err)
	}
	return pid, tok, nil
}

func runToken(ctx context.Context, env *cliEnv, args []string) error {
	pos, err := parse(env, newFlags("token"), args, 1, 1, "PID")
	if err != nil {
		return err
	}
	pid, err := parsePid(pos[0])
	if err != nil {
		return err
	}
	tok, err := local.ReadToken(ctx, pid)
	if err != nil {
		return apiFail(err)
	}
	fmt.Fprintln(env.stdout, tok)
	return nil
}

func runVerify(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("verify")
	asJSON := fs.Bool("json", false, "print the verdict as one JSON object")
	mech := mechanismFlag(fs, "")
	sock := socketFlag(fs)
	pos, err := parse(env, fs, args, 2, 2, "PID TOKEN")
	if err != nil {
		return err
	}
	pid, claim, err := parseClaim(pos)
	if err != nil {
		return err
	}
	v, err := verifyVia(ctx, env, *sock, *mech, pid, claim)
	if err != nil {
		return err
	}
	if *asJSON {
		err = printJSON(env, v, "")
	} else {
		view.Verdict(env.stdout, v)
	}
	if err == nil && v.Result != verdict.Owned {
		err = silentExit(client.VerdictExit(v.Result))
	}
	return err
}

// verifyVia judges by the daemon, or here (client.Verify).
func verifyVia(ctx context.Context, env *cliEnv, sock, mech string, pid int32, claim token.Token) (verdict.Verdict, error) {
	c := dial(sock)
	defer c.Close()
	v, err := client.Verify(ctx, c, mech, pid, claim, env.stderr)
	return v, apiFail(err)
}

func runKill(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("kill")
	asJSON := fs.Bool("json", false, "print the outcome as one JSON object")
	grace := fs.Duration("grace", actions.DefaultGrace, "how long the tree gets to exit after SIGTERM before SIGKILL")
	mech := mechanismFlag(fs, "")
	heldOnly := fs.Bool("held-only", false, "only what the daemon holds: never a teardown here (not held: 66, no daemon: 69)")
	sock := socketFlag(fs)
	pos, err := parse(env, fs, args, 2, 2, "PID TOKEN")
	if err != nil {
		return err
	}
	if *grace < 0 || *grace > api.MaxGrace {
		return fail(exitUsage, "--grace %v: want a duration between 0 and %v", *grace, api.MaxGrace)
	}
	if *heldOnly && *mech != "" {
		return fail(exitUsage, "--held-only and --mechanism exclude each other (--mechanism forces a teardown here)")
	}
	pid, claim, err := parseClaim(pos)
	if err != nil {
		return err
	}
	out, err := killVia(ctx, env, *sock, *mech, *heldOnly, pid, claim, *grace)
	if err != nil {
		return err
	}
	if *asJSON {
		err = printJSON(env, out, "")
	} else {
		view.Outcome(env.stdout, out)
	}
	if err == nil {
		err = silentExit(client.KillExit(out))
	}
	return err
}

// killVia tears down through the daemon, or here (client.Kill).
func killVia(ctx context.Context, env *cliEnv, sock, mech string, heldOnly bool, pid int32, claim token.Token, grace time.Duration) (actions.Outcome, error) {
	c := dial(sock)
	defer c.Close()
	out, err := client.Kill(ctx, c, mech, pid, claim, grace, heldOnly, env.stderr, client.Progress(env.stderr, "supervisor kill: "))
	return out, apiFail(err)
}
