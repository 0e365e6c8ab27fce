package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/client"
	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/view"
)

// clientExits documents the exit codes of the commands that only ask the
// daemon (apiFail).
const clientExits = "Exit codes: 0 done, 64 bad arguments, 69 no daemon, 75 busy, 77 refused, 70 other errors."

func init() {
	register("run", "run the supervisor daemon in the foreground", runDaemon,
		`run [--config FILE] [--check-config] [FLAGS (below)]

Runs the daemon until SIGTERM or SIGINT, which stop it cleanly and leave
every process running and every claim recorded. The config file is JSON with
the flags' names, underscores for dashes ({"state_dir": "/var/lib/x",
"grace": "10s"}); flags given on the command line win over it. It must be
a regular file of root's (or the daemon's user's) that only its owner may
write, with no other link, named by its own path (not a symlink's), in a
directory only root (or that user) may write to (above it, sticky ones such
as /tmp may be writable by others). --check-config checks
what run would, the state, socket, log and metrics socket directories
too, and creates nothing. Exit codes:
0 clean stop, 64 bad arguments or configuration, 69 another daemon holds the
state directory or the mechanism cannot run, 70 other errors (an unreadable
store, or a missing one whose lock file or job output is still in the state
directory: the daemon refuses to start; put the file back, or remove those to
start with an empty store).`)
	register("launch", "start a process under the daemon (a grant, or with --detach a job)", runLaunch,
		`launch [--owner O] [--detach] [--wall-clock D] [--bind-to-caller | --holder PID --holder-token TOKEN] [--no-new-privs] [--cwd DIR] [--socket PATH] [--json] [--wait] PROGRAM [ARGS...]

Prints the claim's id, pid and token on one line (--json: the whole claim as
one JSON object). Flags end at PROGRAM (or at "--"): what follows is the
program's own. --bind-to-caller
binds the grant to the process that ran this command: when it exits, the
grant is torn down. A caller that has exited by then is refused (65), not
replaced by whatever adopted this command, but one that exited before this
command started cannot be told from a subreaper that adopted it: a program
that backgrounds the launch names itself with --holder PID --holder-token
TOKEN, its token read of itself (supervisor token PID). Init, the daemon and
its ancestors are never holders. Exit codes: 0 launched, 3 the holder named
is not OWNED now or is one that never holds, 64 bad arguments,
65 malformed token or the caller gone, 69 no daemon,
75 busy (a rate or cap: retry later), 77 refused, 70 other errors.`)
	commands["launch"].argv = true
	register("admit", "register an existing process (PID TOKEN) as a grant", runAdmit,
		`admit PID TOKEN [--owner O] [--socket PATH]

Only a process that verifies now (OWNED) and that the caller may act on is
admitted. Prints the claim as JSON. Exit codes: 0 admitted, 3 not OWNED or
already claimed, 64 bad arguments, 65 malformed token, 69 no daemon, 75 busy,
77 refused, 70 other errors.`)
	register("release", "tear down a claim's whole tree and record the outcome", runRelease,
		`release ID [--grace D] [--json] [--socket PATH]

The teardown runs in the daemon to its end: interrupted (Ctrl-C), this
command says so and how to follow it (supervisor wait ID), and exits 130.
Exit codes: 0 released (nothing left alive), 2 survivors or live members
reported, 3 unverifiable, 66 no such claim, 69 no daemon, 75 busy, 77 refused (the
daemon or one of its ancestors is never released), 130 interrupted.`)
	register("list", "list live claims with their state, age and result", runList,
		"list [-a] [--state S] [--owner O] [--watch] [--json] [--socket PATH]\n\nLists the claims still held (running, releasing, survivors, unverifiable;\n-a: every claim, finished ones too). "+clientExits)
	register("show", "print one claim in full: members, holder, times, result", runShow,
		"show ID [--json] [--socket PATH]\n\nExit codes: 0 done, 64 bad arguments, 66 no such claim (or another user's), 69 no daemon, 75 busy, 77 refused, 70 other errors.")
	register("reap", "run the reaper once (orphans, gone roots, reissued pids)", runReap,
		"reap [--dry-run] [--json] [--socket PATH]\n\n"+clientExits)
	register("status", "show the daemon's mechanism, uptime, counts and lost events", runStatus,
		"status [--json] [--socket PATH]\n\n"+clientExits)
}

func socketFlag(fs *flag.FlagSet) *string {
	return fs.String("socket", "", "the daemon's socket (default $"+daemon.SocketEnv+", else "+daemon.RootSocket+" for root, $XDG_RUNTIME_DIR/supervisor.sock for a user)")
}

// dial returns a client of the daemon at the socket --socket names, or
// that daemon.FindSocket finds.
func dial(sock string) *api.Client { dialed = daemon.FindSocket(sock); return api.NewClient(dialed) }

var dialed string // the socket dial chose, for apiFail

func runDaemon(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("run")
	cfg := daemon.DefaultConfig()
	cfg.Flags(fs)
	configFile := fs.String("config", "", "JSON config file (flags win over it)")
	check := fs.Bool("check-config", false, "validate the configuration (file, flags and the directories they name, as run would, creating nothing), say what is wrong, and exit")
	if _, err := parse(env, fs, args, 0, 0, ""); err != nil {
		return err
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
	if err := cfg.CheckHost(); err != nil {
		return fail(exitUsage, "%v", err)
	}
	if *check {
		// Run checks these as it creates what is missing.
		if err := cfg.CheckPaths(); err != nil {
			return fail(exitUsage, "%v", err)
		}
		fmt.Fprintln(env.stdout, "configuration is valid")
		return printJSON(env, cfg, "  ")
	}
	err := daemon.Run(ctx, cfg, func(i daemon.Info) {
		r := i.Reconcile
		fmt.Fprintf(env.stderr, "supervisor: serving on %s (mechanism %s; reconciled %d claims: %d readopted, %d torn down, %d foreign, %d unverifiable, %d gone, %d failed)\n",
			i.Socket, i.Mechanism, r.Seen, r.Readopted, r.TornDown, r.Foreign, r.Unverifiable, r.AlreadyGone, r.Failed)
	})
	if err != nil {
		return fail(runCode(err), "%v", err)
	}
	return nil
}

func runLaunch(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("launch")
	owner := fs.String("owner", "", "free-text owner label")
	detach := fs.Bool("detach", false, "launch a job (detached, survives restarts, output kept)")
	wall := fs.Duration("wall-clock", 0, "tear the grant (or job) down after this long")
	bind := fs.Bool("bind-to-caller", false, "bind the grant to the process that ran this command")
	holderPid := fs.Int("holder", 0, "bind the grant to this process (with --holder-token): one the caller names, its token read by itself")
	holderTok := fs.String("holder-token", "", "the token of the --holder process (supervisor token PID)")
	cwd := fs.String("cwd", "", "working directory (default: this command's)")
	nnp := fs.Bool("no-new-privs", false, "no setuid program the workload runs gains privileges")
	asJSON := fs.Bool("json", false, "print the claim as one JSON object")
	wait := fs.Bool("wait", false, "then wait until the claim has ended, print how, exit as wait does")
	sock := socketFlag(fs)
	argv, err := parse(env, fs, args, 1, -1, "PROGRAM [ARGS...]")
	switch {
	case err != nil:
		return err
	case *wall < 0:
		return fail(exitUsage, "--wall-clock %v: must not be negative", *wall)
	case (*bind || *holderPid != 0) && *detach:
		return fail(exitUsage, "--bind-to-caller and --holder exclude --detach (a job is never bound)")
	case *bind && *holderPid != 0:
		return fail(exitUsage, "--bind-to-caller and --holder exclude each other")
	case (*holderPid != 0) != (*holderTok != ""):
		return fail(exitUsage, "--holder and --holder-token go together")
	}
	if *cwd == "" {
		*cwd, _ = os.Getwd()
	}
	req := &api.LaunchRequest{Argv: argv, Cwd: *cwd, Env: os.Environ(), Owner: *owner, Detach: *detach, WallClock: api.Duration(*wall), NoNewPrivs: *nnp}
	switch {
	case *bind:
		h, err := callerHolder(ctx)
		if err != nil {
			return err
		}
		req.Bind, req.Holder = true, h
	case *holderPid != 0:
		pid, tok, err := parseClaim([]string{strconv.Itoa(*holderPid), *holderTok})
		if err != nil {
			return err
		}
		req.Bind, req.Holder = true, &store.Instance{Pid: pid, Token: tok}
	}
	restoreNofile()
	c := dial(*sock)
	defer c.Close()
	cl, err := c.Launch(ctx, req)
	if err != nil {
		return apiFail(err)
	}
	if *asJSON {
		err = printJSON(env, cl, "")
	} else {
		view.Launched(env.stdout, cl)
	}
	if err != nil || !*wait {
		return err
	}
	return waitClaim(ctx, env, c, cl.ID, 0, false)
}

// callerHolder is the instance of the process that ran this command: its
// parent when it started (startParent), its token read through a pidfd
// while it still is the parent. A caller that exited first (`launch ... &`
// and exit) left this command to init or a subreaper, which is refused
// when this command sees it (its parent changed, or is init); one that
// exited before this command started cannot be told from a subreaper that
// took it: --holder names the caller for sure.
func callerHolder(ctx context.Context) (*store.Instance, error) {
	ppid := startParent
	if ppid <= 1 || int32(os.Getppid()) != ppid {
		return nil, fail(exitData, "binding to the caller: it has exited (this command's parent is now %d); name it with --holder PID --holder-token TOKEN", os.Getppid())
	}
	tok, err := local.ReadToken(ctx, ppid)
	if err != nil {
		return nil, fail(exitSoftware, "binding to the caller %d: %v", ppid, err)
	}
	// Still the parent after the token was read: the pid named the
	// caller throughout (a parent changes only when it exits).
	if int32(os.Getppid()) != ppid {
		return nil, fail(exitData, "binding to the caller %d: it exited while it was read; name it with --holder PID --holder-token TOKEN", ppid)
	}
	return &store.Instance{Pid: ppid, Token: tok}, nil
}

func runAdmit(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("admit")
	owner := fs.String("owner", "", "free-text owner label")
	sock := socketFlag(fs)
	pos, err := parse(env, fs, args, 2, 2, "PID TOKEN")
	if err != nil {
		return err
	}
	pid, tok, err := parseClaim(pos)
	if err != nil {
		return err
	}
	c := dial(*sock)
	defer c.Close()
	cl, err := c.Admit(ctx, &api.AdmitRequest{Pid: pid, Token: tok, Owner: *owner})
	if err != nil {
		return apiFail(err)
	}
	return printJSON(env, cl, "  ")
}

func runRelease(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("release")
	grace := fs.Duration("grace", -1, "grace period after SIGTERM (default: the daemon's)")
	asJSON := fs.Bool("json", false, "print the claim and outcome as JSON")
	sock := socketFlag(fs)
	pos, err := parse(env, fs, args, 1, 1, "ID")
	if err != nil {
		return err
	}
	req := &api.ReleaseRequest{}
	if *grace >= 0 {
		g := api.Duration(*grace)
		req.Grace = &g
	} else if *grace != -1 {
		return fail(exitUsage, "--grace %v: must not be negative", *grace)
	}
	c := dial(*sock)
	defer c.Close()
	res, err := client.Release(ctx, c, pos[0], req, client.Progress(env.stderr, "supervisor release: "))
	if err != nil {
		return apiFail(err)
	}
	out := res.Outcome
	err = show(env, *asJSON, res, func(w io.Writer) { view.Release(w, res) })
	if err == nil && out != nil && (len(out.Survivors) > 0 || len(out.Unproven) > 0) {
		err = silentExit(client.ExitKillSurvivors)
	}
	return err
}

func runList(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("list")
	asJSON := fs.Bool("json", false, "print the claims as a JSON array")
	all := fs.Bool("a", false, "every claim, finished ones too")
	q := api.ListQuery{}
	fs.StringVar(&q.State, "state", "", "only claims in this state: "+view.Join(store.States(), "|"))
	fs.StringVar(&q.Owner, "owner", "", "only claims with this owner label")
	watch := fs.Bool("watch", false, "redraw whenever the list changes, until Ctrl-C")
	sock := socketFlag(fs)
	if _, err := parse(env, fs, args, 0, 0, ""); err != nil {
		return err
	} else if q.State != "" && !slices.Contains(store.States(), store.State(q.State)) {
		return fail(exitUsage, "--state %q: want one of %s", q.State, view.Join(store.States(), ", "))
	}
	c := dial(*sock)
	defer c.Close()
	list := func(w io.Writer) error {
		cs, err := c.ListAll(ctx, q)
		if err != nil {
			return apiFail(err)
		}
		cs = view.Filter(cs, *all || q.State != "", daemon.Open)
		return show(&cliEnv{stdout: w}, *asJSON, cs, func(w io.Writer) { view.Claims(w, cs, time.Now()) })
	}
	if *watch {
		return view.Watch(ctx, env.stdout, time.Second, list)
	}
	return list(env.stdout)
}

func runShow(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("show")
	asJSON := fs.Bool("json", false, "print the claim as JSON")
	sock := socketFlag(fs)
	pos, err := parse(env, fs, args, 1, 1, "ID")
	if err != nil {
		return err
	}
	c := dial(*sock)
	defer c.Close()
	cl, err := c.Get(ctx, pos[0])
	if err != nil {
		return apiFail(err)
	}
	return show(env, *asJSON, cl, func(w io.Writer) { view.Show(w, cl, time.Now()) })
}

func runReap(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("reap")
	dry := fs.Bool("dry-run", false, "report what the reaper would do, do nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	sock := socketFlag(fs)
	if _, err := parse(env, fs, args, 0, 0, ""); err != nil {
		return err
	}
	c := dial(*sock)
	defer c.Close()
	rep, err := c.Reap(ctx, *dry)
	if err != nil {
		return apiFail(err)
	}
	return show(env, *asJSON, rep, func(w io.Writer) { view.Report(w, rep) })
}

func runStatus(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("status")
	asJSON := fs.Bool("json", false, "print the status as JSON")
	sock := socketFlag(fs)
	if _, err := parse(env, fs, args, 0, 0, ""); err != nil {
		return err
	}
	c := dial(*sock)
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		return apiFail(err)
	}
	return show(env, *asJSON, st, func(w io.Writer) { view.Status(w, st) })
}
