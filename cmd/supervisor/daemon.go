package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/tracker"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run the supervisor daemon in the foreground",
		usage: `run [--config FILE] [--state-dir DIR] [--socket PATH] [--socket-group G]
    [--mechanism auto|ebpf|netlink|proc|ps] [--log-output OUT] [--log-schema ecs|ocsf]
    [--grace D] [--reap-interval D] [--retain-final D] [--retain-owed D] [--max-final N]
    [--cgroup auto|off|DIR] [--graph-max-exited N] [--graph-max-exited-age D]
    [--metrics-listen ADDR] [--check-config]

Runs the daemon until SIGTERM or SIGINT, which stop it cleanly and leave
every process running and every claim recorded. The config file is JSON with
the flags' names, underscores for dashes ({"state_dir": "/var/lib/x",
"grace": "10s"}); flags given on the command line win over it. Exit codes:
0 clean stop, 64 bad arguments or configuration, 69 another daemon holds the
state directory or the mechanism cannot run, 70 other errors (an unreadable
store: the daemon refuses to start).`,
		run: runDaemon,
	})
	register(&command{
		name:    "launch",
		summary: "start a process under the daemon (a grant, or with --detach a job)",
		usage: `launch [--owner O] [--detach] [--wall-clock D] [--bind-to-caller] [--cwd DIR] [--socket PATH] -- ARGV...

Prints the claim as JSON (id, pid, token, kind grant|job ...). --bind-to-caller
binds the grant to the process that ran this command: when it exits, the
grant is torn down. Exit codes: 0 launched, 64 bad arguments, 69 no daemon,
77 refused, 70 other errors.`,
		run: runLaunch,
	})
	register(&command{
		name:    "admit",
		summary: "register an existing process (PID TOKEN) as a grant",
		usage: `admit PID TOKEN [--owner O] [--socket PATH]

Only a process that verifies now (OWNED) and that the caller may act on is
admitted. Prints the claim as JSON.`,
		run: runAdmit,
	})
	register(&command{
		name:    "release",
		summary: "tear down a claim's whole tree and record the outcome",
		usage: `release ID [--grace D] [--json] [--socket PATH]

Exit codes: 0 released (nothing left alive), 2 survivors or live members
reported, 66 no such claim, 69 no daemon, 77 refused, 3 unverifiable.`,
		run: runRelease,
	})
	register(&command{
		name:    "list",
		summary: "list claims with their state and last verdict",
		usage:   `list [--json] [--socket PATH]`,
		run:     runList,
	})
	register(&command{
		name:    "reap",
		summary: "run the reaper once (orphans, gone roots, reissued pids)",
		usage:   `reap [--dry-run] [--json] [--socket PATH]`,
		run:     runReap,
	})
	register(&command{
		name:    "status",
		summary: "show the daemon's mechanism, uptime, counts and lost events",
		usage:   `status [--json] [--socket PATH]`,
		run:     runStatus,
	})
}

func socketFlag(fs *flag.FlagSet) *string {
	return fs.String("socket", "", "the daemon's socket (default $"+daemon.SocketEnv+", else "+daemon.DefaultSocket()+")")
}

// apiFail maps a client error to an exit code.
func apiFail(err error) error {
	var ae *api.Error
	switch {
	case errors.Is(err, api.ErrNoDaemon):
		return fail(exitUnavailable, "%v", err)
	case errors.As(err, &ae):
		switch {
		case ae.Status == http.StatusForbidden:
			return fail(exitNoPerm, "%s", ae.Message)
		case ae.Status == http.StatusNotFound:
			return fail(exitNoProcess, "%s", ae.Message)
		case ae.Status == http.StatusConflict:
			return fail(exitUnverifiable, "%s", ae.Message)
		case ae.Status >= 400 && ae.Status < 500:
			return fail(exitUsage, "%s", ae.Message)
		}
	}
	return fail(exitSoftware, "%v", err)
}

func printJSON(env *cliEnv, v any) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail(exitSoftware, "%v", err)
	}
	return nil
}

func runDaemon(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("run")
	cfg := daemon.DefaultConfig()
	cfg.Flags(fs)
	configFile := fs.String("config", "", "JSON config file (flags win over it)")
	check := fs.Bool("check-config", false, "validate the configuration (file and flags), say what is wrong, and exit")
	pos, err := parse(fs, commands["run"], env, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fail(exitUsage, "unexpected arguments %q", pos)
	}
	if *configFile != "" {
		if err := cfg.LoadFileUnderFlags(*configFile, fs); err != nil {
			return fail(exitUsage, "%v", err)
		}
	}
	cfg.Version = strings.TrimSpace(version)
	if err := cfg.Validate(); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if *check {
		fmt.Fprintln(env.stdout, "configuration is valid")
		return printJSON(env, cfg)
	}
	err = daemon.Run(ctx, cfg, func(i daemon.Info) {
		r := i.Reconcile
		fmt.Fprintf(env.stderr, "supervisor: serving on %s (mechanism %s; reconciled %d claims: %d readopted, %d torn down, %d foreign, %d unverifiable, %d gone, %d failed)\n",
			i.Socket, i.Mechanism, r.Seen, r.Readopted, r.TornDown, r.Foreign, r.Unverifiable, r.AlreadyGone, r.Failed)
	})
	if err != nil {
		return fail(runCode(err), "%v", err)
	}
	return nil
}

// runCode maps an error of daemon.Run to the exit code of `supervisor run`.
func runCode(err error) int {
	switch {
	case errors.Is(err, daemon.ErrConfig), errors.Is(err, tracker.ErrUnknownMechanism):
		return exitUsage
	case errors.Is(err, daemon.ErrAlreadyRunning), errors.Is(err, daemon.ErrMechanism), errors.Is(err, daemon.ErrUnsupported):
		return exitUnavailable
	}
	return exitSoftware
}

func runLaunch(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("launch")
	owner := fs.String("owner", "", "free-text owner label")
	detach := fs.Bool("detach", false, "launch a job (detached, survives restarts, output kept)")
	wall := fs.Duration("wall-clock", 0, "tear the grant (or job) down after this long")
	bind := fs.Bool("bind-to-caller", false, "bind the grant to the process that ran this command")
	cwd := fs.String("cwd", "", "working directory (default: this command's)")
	sock := socketFlag(fs)
	argv, err := parse(fs, commands["launch"], env, args)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return fail(exitUsage, "want -- ARGV...")
	}
	if *wall < 0 {
		return fail(exitUsage, "--wall-clock %v: must not be negative", *wall)
	}
	if *bind && *detach {
		return fail(exitUsage, "--bind-to-caller and --detach exclude each other (a job is never bound)")
	}
	dir := *cwd
	if dir == "" {
		dir, _ = os.Getwd()
	}
	req := &api.LaunchRequest{
		Argv: argv, Cwd: dir, Env: os.Environ(), Owner: *owner,
		Detach: *detach, WallClock: api.Duration(*wall),
	}
	if *bind {
		// The caller of this command is our parent: bind the grant to it,
		// by its token read now through a pidfd.
		boot, err := bootID()
		if err != nil {
			return err
		}
		ppid := int32(os.Getppid())
		tok, err := pidfd.ReadToken(ppid, boot)
		if err != nil {
			return fail(exitSoftware, "binding to the caller %d: %v", ppid, err)
		}
		req.Bind, req.Holder = true, &store.Instance{Pid: ppid, Token: tok}
	}
	c := api.NewClient(daemon.FindSocket(*sock))
	defer c.Close()
	cl, err := c.Launch(ctx, req)
	if err != nil {
		return apiFail(err)
	}
	return printJSON(env, cl)
}

func runAdmit(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("admit")
	owner := fs.String("owner", "", "free-text owner label")
	sock := socketFlag(fs)
	pos, err := parse(fs, commands["admit"], env, args)
	if err != nil {
		return err
	}
	pid, tok, err := parseClaim(pos)
	if err != nil {
		return err
	}
	c := api.NewClient(daemon.FindSocket(*sock))
	defer c.Close()
	cl, err := c.Admit(ctx, &api.AdmitRequest{Pid: pid, Token: tok, Owner: *owner})
	if err != nil {
		return apiFail(err)
	}
	return printJSON(env, cl)
}

func runRelease(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("release")
	grace := fs.Duration("grace", -1, "grace period after SIGTERM (default: the daemon's)")
	asJSON := fs.Bool("json", false, "print the claim and outcome as JSON")
	sock := socketFlag(fs)
	pos, err := parse(fs, commands["release"], env, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fail(exitUsage, "want ID, got %d arguments", len(pos))
	}
	req := &api.ReleaseRequest{}
	if *grace >= 0 {
		g := api.Duration(*grace)
		req.Grace = &g
	} else if *grace != -1 {
		return fail(exitUsage, "--grace %v: must not be negative", *grace)
	}
	c := api.NewClient(daemon.FindSocket(*sock))
	defer c.Close()
	res, err := c.Release(ctx, pos[0], req)
	if err != nil {
		return apiFail(err)
	}
	if *asJSON {
		if err := printJSON(env, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(env.stdout, "%s %s", res.Claim.ID, res.Claim.State)
		if res.Outcome != nil {
			fmt.Fprintf(env.stdout, " (%s: %s", res.Outcome.Verdict.Result, res.Outcome.Verdict.Reason)
			fmt.Fprintf(env.stdout, "; %d targeted, %d survivors, %d unproven)", len(res.Outcome.Targeted), len(res.Outcome.Survivors), len(res.Outcome.Unproven))
		}
		fmt.Fprintln(env.stdout)
	}
	if res.Outcome != nil && (len(res.Outcome.Survivors) > 0 || len(res.Outcome.Unproven) > 0) {
		return silentExit(exitKillSurvivors)
	}
	return nil
}

func runList(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("list")
	asJSON := fs.Bool("json", false, "print the claims as a JSON array")
	socketFlag(fs)
	c, err := clientFor(fs, "list", env, args)
	if err != nil {
		return err
	}
	defer c.Close()
	cs, err := c.List(ctx)
	if err != nil {
		return apiFail(err)
	}
	if *asJSON {
		return printJSON(env, cs)
	}
	tw := tabwriter.NewWriter(env.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATE\tPID\tVERDICT\tOWNER\tCOMMAND")
	for _, cl := range cs {
		v := "-"
		if cl.LastVerdict != nil {
			v = cl.LastVerdict.Result.String()
		}
		cmd := strings.Join(cl.Argv, " ")
		if len(cmd) > 60 {
			cmd = cmd[:60] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", cl.ID, cl.Kind, cl.State, cl.Pid, v, cl.Owner, sanitize(cmd))
	}
	return tw.Flush()
}

// clientFor parses a client command that takes flags only, and returns a
// client of the daemon's socket (its --socket flag, once parsed).
func clientFor(fs *flag.FlagSet, name string, env *cliEnv, args []string) (*api.Client, error) {
	pos, err := parse(fs, commands[name], env, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 0 {
		return nil, fail(exitUsage, "unexpected arguments %q", pos)
	}
	return api.NewClient(daemon.FindSocket(fs.Lookup("socket").Value.String())), nil
}

// sanitize keeps control characters out of a terminal.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func runReap(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("reap")
	dry := fs.Bool("dry-run", false, "report what the reaper would do, do nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	socketFlag(fs)
	c, err := clientFor(fs, "reap", env, args)
	if err != nil {
		return err
	}
	defer c.Close()
	rep, err := c.Reap(ctx, *dry)
	if err != nil {
		return apiFail(err)
	}
	if *asJSON {
		return printJSON(env, rep)
	}
	printReport(env, rep)
	return nil
}

func printReport(env *cliEnv, r api.Report) {
	fmt.Fprintf(env.stdout, "seen %d, readopted %d, torn down %d, foreign %d, unverifiable %d, already gone %d, failed %d\n",
		r.Seen, r.Readopted, r.TornDown, r.Foreign, r.Unverifiable, r.AlreadyGone, r.Failed)
	for _, it := range r.Items {
		fmt.Fprintf(env.stdout, "  %s %s %s: %s\n", it.ID, it.Verdict, it.Action, sanitize(it.Reason))
	}
}

func runStatus(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("status")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	socketFlag(fs)
	c, err := clientFor(fs, "status", env, args)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return apiFail(err)
	}
	if *asJSON {
		return printJSON(env, st)
	}
	fmt.Fprintf(env.stdout, "pid %d, version %s, mechanism %s, up %s\n", st.Pid, st.Version, st.Mechanism,
		(time.Duration(st.UptimeSeconds) * time.Second).String())
	fmt.Fprintf(env.stdout, "claims %d (members %d), events %d, lost events %d, resyncs %d, members dropped %d\n",
		st.Claims, st.Members, st.Events, st.LostEvents, st.Resyncs, st.MembersLost)
	for k, m := range st.Counts {
		for s, n := range m {
			fmt.Fprintf(env.stdout, "  %s %s: %d\n", k, s, n)
		}
	}
	cg := st.Cgroup
	if cg == "" {
		cg = "none (" + st.CgroupReason + ")"
	}
	fmt.Fprintf(env.stdout, "cgroups: %s\nreconcile at start: ", cg)
	printReport(env, st.Reconcile)
	return nil
}
