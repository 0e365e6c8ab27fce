package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
	"github.com/procsupervisor/supervisor/internal/view"
)

func init() {
	register("events", "stream process events (fork, exec, exit, lost) as they happen", runEvents,
		`events [--mechanism auto|ebpf|netlink|proc|ps] [--json]

Streams process events until SIGINT or SIGTERM, then prints the totals
(events, lost) on stderr and exits 0. With --json, one object per line:
kind, pid, ppid, token, parent_token, comm, mechanism, exit_code (exit),
signal (exit by a signal), exe and argv (exec, where the mechanism gives
them), count (lost), inferred (polling). Exit codes: 0 stopped by a signal,
64 bad arguments, 69 the mechanism cannot run here, 70 other errors.`)
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

// mechanismFlag adds --mechanism to a command's flags.
func mechanismFlag(fs *flag.FlagSet, def string) *string {
	return fs.String("mechanism", def, "event mechanism: "+strings.Join(tracker.Mechanisms, "|"))
}

func runEvents(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("events")
	mech := mechanismFlag(fs, "auto")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	if _, err := parse(env, fs, args, 0, 0, ""); err != nil {
		return err
	}
	w := events.NewWriter(env.stdout, *asJSON)
	t, err := local.Start(ctx, *mech, w.Write)
	if err != nil {
		w.Close()
		return localFail(err)
	}
	w.Start()
	for _, why := range t.Tried() {
		fmt.Fprintf(env.stderr, "supervisor events: skipped %s\n", why)
	}
	fmt.Fprintf(env.stderr, "supervisor events: mechanism %s\n", t.Mechanism())
	<-ctx.Done()
	t.Close()
	w.Close()
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
	t, err := local.Start(ctx, *mech, nil)
	if err != nil {
		return localFail(err)
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
	opt := view.TreeOptions{Tokens: tokens, Width: view.Width(env.stdout), Cmdline: local.Cmdline}
	v := struct {
		Mechanism string             `json:"mechanism"`
		Ancestry  []lineage.TreeNode `json:"ancestry"`
		Tree      *lineage.TreeNode  `json:"tree"`
	}{mech, ancestry, tree}
	return show(env, asJSON, v, func(w io.Writer) { view.Tree(w, mech, tree, ancestry, opt) })
}
