package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/quietfile"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/view"
)

func init() {
	register("events", "stream process and claim events (fork, exec, exit, lost, claim) as they happen", runEvents,
		`events [--socket PATH | --mechanism M] [--json] [--tokens] [--pid P] [--tree P] [--claim ID] [--kind K,..] [--comm C] [--redact-args PATTERN]...

Streams events until SIGINT or SIGTERM, a line each: time, kind, pid, ppid,
uid, command line, exit code and duration. Reads the daemon's stream when
its socket answers (users other than root see their own processes and
claims, and of them only what /proc would show them), else, or with
--mechanism, a local mechanism (totals on stderr at the end). Filters
combine; --tree follows PID's children as they fork.
--json prints one object per line: kind, mechanism, pid, ppid, token,
parent_token, comm, exit_code, signal, count (lost), inferred; an exec's
context (exe, argv, args_count, args_truncated, args_redacted, working_directory,
users, leaders, tty, vpid, cgroup, container, parent; absent when unknown);
invalid_utf8, the texts whose bytes were not UTF-8 (written as U+FFFD);
from the daemon also time, uid, claim, withheld (what a user other than
root is not shown), and claim events. A local mechanism's arguments are
redacted by the installed config's redact_args (see supervisor.conf.md),
or by --redact-args patterns instead ('' for none); the daemon's stream is redacted by
the daemon's own patterns, so with the stream the flag is refused. Exit codes: 0
stopped by a signal, 64 bad arguments, 69 the mechanism cannot run here or
the daemon stopped, 75 busy (stream cap), 77 refused, 70 other errors.`)
	register("tree", "print the process lineage as the graph knows it", runTree,
		`tree [PID] [--tokens] [--mechanism M] [--socket PATH] [--json]

Prints the lineage graph like pstree: the birth ancestry of PID (exited
ancestors marked), then its descendants through birth lineage, each with its
command line, cut to the terminal's width, and the id of the claim it
belongs to in brackets (when the daemon answers). Without PID, the whole
graph. Asks the daemon when its socket answers: it knows the birth
lineage of processes init adopted long ago. A local run (no daemon, or
--mechanism) knows only what one scan of /proc shows. Exit codes: 0 printed,
64 bad arguments, 66 no such process, 69 the mechanism cannot run here,
77 refused, 70 other errors.`)
}

// redactFlag adds --redact-args to a command's flags: the daemon's
// repeatable pattern flag (an empty one for none). The function it returns, called
// after parsing, gives the patterns and whether the flag was given at all.
func redactFlag(fs *flag.FlagSet) func() (pats []string, set bool) {
	var l daemon.PatternList
	fs.Var(&l, "redact-args", "argument redaction `pattern` for a local mechanism (repeat for more), instead of the installed config's: NAME=VALUE, 'FLAG NEXT' or GLOB; '' for none")
	return func() ([]string, bool) {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "redact-args" })
		return l, set
	}
}

// mechanismFlag adds --mechanism to a command's flags.
func mechanismFlag(fs *flag.FlagSet, def string) *string {
	return fs.String("mechanism", def, "event mechanism: "+strings.Join(tracker.Mechanisms, "|"))
}

func runEvents(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("events")
	mech, sock := mechanismFlag(fs, ""), socketFlag(fs)
	o := view.EventFlags(fs)
	redactArgs := redactFlag(fs)
	if _, err := parse(env, fs, args, 0, 0, ""); err != nil {
		return err
	}
	pats, patsSet := redactArgs()
	rules, err := redact.Parse(pats)
	if err != nil {
		return fail(exitUsage, "--redact-args: %v", err)
	}
	var cfgErr error
	if !patsSet {
		// A local mechanism is redacted as the daemon would be, by the
		// installed config's patterns (as a local tree is).
		rules, cfgErr = daemon.InstalledRedaction()
	}
	out := quietfile.For(env.stdout)
	if q, ok := out.(*quietfile.Writer); ok {
		defer q.Close() // after the printer's last write
	}
	p, err := view.NewEventPrinter(out, *o)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	defer p.Close()
	if *mech == "" {
		c := dial(*sock)
		defer c.Close()
		st, err := c.Events(ctx, p.Filter().StreamKinds())
		if err == nil && len(pats) > 0 {
			// The stream's lines are printed as the daemon wrote them:
			// patterns of this command could not hide anything in them.
			st.Close()
			p.Abort()
			return fail(exitUsage, "--redact-args: the daemon's stream at %s is redacted by the daemon's own patterns (redact_args); add --mechanism to watch with these", c.Socket())
		}
		if err == nil {
			fmt.Fprintf(env.stderr, "supervisor events: the daemon's stream at %s\n", c.Socket())
			err = p.Copy(ctx, st)
		}
		if err != nil && (st != nil || !errors.Is(err, api.ErrNoDaemon)) {
			return apiFail(err)
		} else if st != nil {
			return nil
		}
		*mech = "auto"
	}
	if cfgErr != nil {
		// Printing every argv would bypass patterns this user cannot read.
		p.Abort()
		return fail(exitSoftware, "the installed config's redaction patterns: %v (give --redact-args to use others, '' for none)", cfgErr)
	}
	if err := p.Filter().Local(); err != nil {
		return fail(exitUsage, "%v", err)
	}
	daemon.SetGCPercent() // short-lived event garbage, as in the daemon
	t, err := local.Start(ctx, *mech, p.Event, rules)
	if err != nil {
		p.Abort()
		return apiFail(err)
	}
	p.Start()
	for _, why := range t.Tried() {
		fmt.Fprintf(env.stderr, "supervisor events: skipped %s\n", why)
	}
	fmt.Fprintf(env.stderr, "supervisor events: mechanism %s\n", t.Mechanism())
	<-ctx.Done()
	t.Close()
	p.Close()
	st := t.Stats()
	fmt.Fprintf(env.stderr, "supervisor events: %d events, %d lost, %d decode errors (mechanism %s)\n",
		st.Events, st.Lost, st.DecodeErrors, t.Mechanism())
	return t.Err()
}

func runTree(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("tree")
	mech := mechanismFlag(fs, "")
	asJSON := fs.Bool("json", false, "print the tree as JSON")
	tokens := fs.Bool("tokens", false, "show each process's start token")
	sock := socketFlag(fs)
	pos, err := parse(env, fs, args, 0, 1, "at most one PID")
	if err != nil {
		return err
	}
	pid := int32(1)
	if len(pos) == 1 {
		if pid, err = parsePid(pos[0]); err != nil {
			return err
		}
	}
	if *mech == "" {
		c := dial(*sock)
		defer c.Close()
		nodes, err := c.Tree(ctx, pid, token.Token{})
		switch {
		case err == nil:
			return printTree(env, "daemon", lineage.Arrange(nodes), nil, *asJSON, *tokens)
		case !errors.Is(err, api.ErrNoDaemon):
			return apiFail(err)
		}
		*mech = "proc"
	}
	t, err := local.Start(ctx, *mech, nil, nil)
	if err != nil {
		return apiFail(err)
	}
	defer t.Close()
	tree, ancestry, ok := t.Graph().TreeOf(pid)
	if !ok {
		return fail(exitNoProcess, "no process %d in the lineage graph", pid)
	}
	return printTree(env, "local:"+string(t.Mechanism()), tree, ancestry, *asJSON, *tokens)
}

// printTree prints the tree under its ancestry, nearest ancestor first.
func printTree(env *cliEnv, mech string, tree *lineage.TreeNode, ancestry []lineage.TreeNode, asJSON, tokens bool) error {
	opt := view.TreeOptions{Tokens: tokens, Width: view.Width(env.stdout), Cmdline: daemon.TreeCmdline(mech)}
	v := struct {
		Mechanism string             `json:"mechanism"`
		Ancestry  []lineage.TreeNode `json:"ancestry"`
		Tree      *lineage.TreeNode  `json:"tree"`
	}{mech, ancestry, tree}
	err := show(env, asJSON, v, func(w io.Writer) { view.Tree(w, mech, tree, ancestry, opt) })
	if tree != nil && tree.DescendantsCut > 0 && !asJSON {
		fmt.Fprintf(env.stderr, "supervisor tree: %d more descendants not listed (an answer lists at most %d processes; ask for a subtree)\n",
			tree.DescendantsCut, api.MaxTreeNodes)
	}
	return err
}
