package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/daemon"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/tracker"
)

func init() {
	register(&command{
		name:    "events",
		summary: "stream process events (fork, exec, exit, lost) as they happen",
		usage: `events [--mechanism auto|ebpf|netlink|proc|ps] [--json]

Streams process events until SIGINT or SIGTERM, then prints the totals
(events, lost) on stderr and exits 0. With --json, one object per line:
kind, pid, ppid, token, parent_token, comm, mechanism, exit_code (exit),
signal (exit by a signal), exe and argv (exec, where the mechanism gives
them), count (lost), inferred (polling). Exit codes: 0 stopped by a signal,
64 bad arguments, 69 the mechanism cannot run here, 70 other errors.`,
		run: runEvents,
	})
	register(&command{
		name:    "tree",
		summary: "print the process lineage as the graph knows it",
		usage: `tree [PID] [--mechanism M] [--socket PATH] [--json]

Prints the lineage graph like pstree: the birth ancestry of PID (exited
ancestors marked), then its descendants through birth lineage. Without PID,
the whole graph. Asks the daemon when its socket answers: it knows the birth
lineage of processes init adopted long ago. A local run (no daemon, or
--mechanism) knows only what one scan of /proc shows.`,
		run: runTree,
	})
}

// mechanismFlag adds --mechanism to a command's flags.
func mechanismFlag(fs interface {
	String(name, value, usage string) *string
}, def string) *string {
	return fs.String("mechanism", def, "event mechanism: "+strings.Join(tracker.Mechanisms, "|"))
}

// startTracker starts the named mechanism, mapping failures to exit codes.
func startTracker(ctx context.Context, mech string, boot procfs.BootID, onEvent func(*events.Event)) (*tracker.Tracker, error) {
	t, err := tracker.Start(ctx, tracker.Options{Mechanism: mech, Boot: boot, OnEvent: onEvent})
	switch {
	case errors.Is(err, tracker.ErrUnknownMechanism):
		return nil, fail(exitUsage, "--mechanism: %v", err)
	case err != nil:
		return nil, fail(exitUnavailable, "%v", err)
	}
	return t, nil
}

func runEvents(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("events")
	mech := mechanismFlag(fs, "auto")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	pos, err := parse(fs, commands["events"], env, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fail(exitUsage, "unexpected arguments %q", pos)
	}
	boot, err := bootID()
	if err != nil {
		return err
	}
	w := events.NewWriter(env.stdout, *asJSON)
	t, err := startTracker(ctx, *mech, boot, w.Write)
	if err != nil {
		w.Close()
		return err
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
	sock := socketFlag(fs)
	pos, err := parse(fs, commands["tree"], env, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return fail(exitUsage, "want at most one PID, got %d arguments", len(pos))
	}
	pid := int32(1)
	if len(pos) == 1 {
		if pid, err = parsePid(pos[0]); err != nil {
			return err
		}
	}
	if *mech == "" {
		nodes, err := api.NewClient(daemon.FindSocket(*sock)).Tree(ctx, pid, token.Token{})
		switch {
		case err == nil:
			return printTreeOf(env, "daemon", lineage.Arrange(nodes), nil, *asJSON)
		case !errors.Is(err, api.ErrNoDaemon):
			return apiFail(err)
		}
		*mech = "proc"
	}
	boot, err := bootID()
	if err != nil {
		return err
	}
	t, err := startTracker(ctx, *mech, boot, nil)
	if err != nil {
		return err
	}
	defer t.Close()
	tree, ancestry, ok := t.Graph().TreeOf(pid)
	if !ok {
		return fail(exitNoProcess, "no process %d in the lineage graph", pid)
	}
	return printTreeOf(env, "local:"+string(t.Mechanism()), tree, ancestry, *asJSON)
}

func printTreeOf(env *cliEnv, mech string, tree *lineage.TreeNode, ancestors []lineage.TreeNode, asJSON bool) error {
	if asJSON {
		out := struct {
			Mechanism string             `json:"mechanism"`
			Ancestry  []lineage.TreeNode `json:"ancestry"`
			Tree      *lineage.TreeNode  `json:"tree"`
		}{mech, ancestors, tree}
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	w := bufio.NewWriter(env.stdout)
	defer w.Flush()
	fmt.Fprintf(w, "# lineage by %s\n", mech)
	if len(ancestors) > 0 {
		fmt.Fprint(w, "# ancestry: ")
		for i := len(ancestors) - 1; i >= 0; i-- {
			fmt.Fprintf(w, "%s > ", label(ancestors[i]))
		}
		fmt.Fprintln(w, label(*tree))
	}
	printTree(w, tree, "", "")
	return nil
}

func label(n lineage.TreeNode) string {
	s := fmt.Sprintf("%d %s", n.Pid, n.Comm)
	if n.Exited {
		s += " (exited)"
	}
	return s
}

func printTree(w io.Writer, n *lineage.TreeNode, first, rest string) {
	fmt.Fprintf(w, "%s%s  %s\n", first, label(*n), n.Token)
	for i, c := range n.Children {
		if i == len(n.Children)-1 {
			printTree(w, c, rest+"└─ ", rest+"   ")
		} else {
			printTree(w, c, rest+"├─ ", rest+"│  ")
		}
	}
}
