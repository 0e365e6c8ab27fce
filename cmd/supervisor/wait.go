package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/client"
	"github.com/procsupervisor/supervisor/internal/verdict"
	"github.com/procsupervisor/supervisor/internal/view"
)

func init() {
	register("wait", "wait until a claim (or a process) has ended, and print how", runWait,
		`wait ID | PID TOKEN [--timeout D] [--json] [--socket PATH]

Waits until claim ID is released, exited, retired or dropped, and prints how
it ended ("j-... exited (3)"); with PID TOKEN, until the daemon no longer
judges that process OWNED, and prints the verdict. It asks the daemon at
most every second. Exit codes: 0 released with nothing left alive, a job
that exited 0, or a process gone; 1 a job that exited otherwise or by a
signal; 2 survivors left; 3 retired, dropped, unverifiable, or a job
whose exit status is unknown (it ended while the daemon was stopped); 64 bad
arguments; 66 no such claim; 69 no daemon; 75 timed out; 77 refused;
130 interrupted (the claim goes on).`)
}

func runWait(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("wait")
	timeout := fs.Duration("timeout", 0, "give up after this long (0: never)")
	asJSON := fs.Bool("json", false, "print the ended claim (or the verdict) as JSON")
	sock := socketFlag(fs)
	pos, err := parse(env, fs, args, 1, 2, "ID, or PID TOKEN")
	if err != nil {
		return err
	}
	c := dial(*sock)
	defer c.Close()
	if len(pos) == 1 {
		return waitClaim(ctx, env, c, pos[0], *timeout, *asJSON)
	}
	pid, tok, err := parseClaim(pos)
	if err != nil {
		return err
	}
	v, err := client.WaitProcess(ctx, c, pid, tok, *timeout)
	if err != nil {
		return apiFail(err)
	}
	err = show(env, *asJSON, v, func(w io.Writer) { fmt.Fprintln(w, v.Result) })
	if err == nil && v.Result == verdict.Unverifiable {
		err = silentExit(client.WaitUnknown)
	}
	return err
}

// waitClaim waits for claim id to end, prints how, and exits with the
// code of its end (client.WaitCode).
func waitClaim(ctx context.Context, env *cliEnv, c *api.Client, id string, timeout time.Duration, asJSON bool) error {
	cl, err := client.Wait(ctx, c, id, timeout)
	if err != nil {
		return apiFail(err)
	}
	if err := show(env, asJSON, cl, func(w io.Writer) { view.Ended(w, cl) }); err != nil {
		return err
	}
	return silentExit(client.WaitCode(cl))
}
