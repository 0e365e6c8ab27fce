// Package view renders what the daemon and the local path answer for a
// person at a terminal: claims (a list with age and result, one in full),
// verdicts, reports, status, teardown outcomes, lineage trees and what the
// binary is. It knows the terminal's width (TIOCGWINSZ on the output; none
// when the output is not a terminal) and redraws a view when it changes
// (Watch, by polling: the daemon pushes nothing). Every string that came
// from a process or a user (a command line, an owner label, a comm, a
// reason) goes through Sanitize here, in one place, so that no view writes
// a terminal escape a workload chose. JSON output (JSON, Print) writes
// control characters (C0 and C1), U+2028, U+2029 and the bidirectional
// controls as \uXXXX escapes; it leaves <, > and & as they are.
package view

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Sanitize replaces with '?' what would not show as the text it is on a
// terminal: control characters (ESC among them, C1 too), format
// characters (Cf: the bidirectional controls, U+202E among them, which
// would show the rest of a line reversed, and zero-width spaces and
// joiners), spaces other than ' ' (NBSP, U+3000: an argument padded with
// them to the terminal's edge showed a second line, a fake one) and the
// line and paragraph separators.
func Sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf {
			if r < 0x20 || r == 0x7f {
				return '?'
			}
			return r
		}
		if r < 0xa0 || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp, unicode.Cf) {
			return '?'
		}
		return r
	}, s)
}

// Columns are counted as a terminal could at most show them: one for an
// ASCII character, two for every other (a wide CJK character takes two; a
// combining mark none, an East Asian ambiguous one such as "…" one or two
// by the terminal's setting), so that a line cut to the width never wraps.
// A byte that is not UTF-8 counts as a character.

// cutAt returns where s must be cut to fit n columns with a mark of two
// after it: the byte index where its longest prefix of at most n-2
// columns ends (of n, with no mark, when n < 2), and false; or len(s) and
// true when s fits in n columns whole. No character is split.
func cutAt(s string, n int) (int, bool) {
	room := n - 2
	if n < 2 {
		room = n
	}
	cols, keep := 0, 0
	for i := 0; i < len(s); {
		w, size := 1, 1
		if s[i] >= utf8.RuneSelf {
			_, size = utf8.DecodeRuneInString(s[i:])
			w = 2
		}
		cols += w
		if cols > n {
			// Never inside a [REDACTED] mark: "--password=[RED…" read
			// as a password.
			return redact.Cut(s, keep), false
		}
		i += size
		if cols <= room {
			keep = i
		}
	}
	return len(s), true
}

// cutMark ends a line that was cut.
const cutMark = "…"

// table writes rows of cells in columns two spaces apart, each sanitized,
// and on a terminal each line cut to its width: a user's owner label
// padded with spaces to the terminal's edge wrapped in root's show into a
// line that read as the claim's uid, 0.
func table(w io.Writer, rows [][]string) {
	width := Width(w)
	var buf bytes.Buffer
	out := w
	if width > 0 {
		out = &buf
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	for _, row := range rows {
		for i, cell := range row {
			row[i] = Sanitize(cell)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	if width > 0 {
		w.Write(cutLines(buf.Bytes(), width))
	}
}

// Report prints a reconcile or reaper report.
func Report(w io.Writer, r api.Report) {
	by := ""
	if r.Mechanism != "" {
		by = " (judged by " + Sanitize(r.Mechanism) + ")"
	}
	fmt.Fprintf(w, "seen %d, readopted %d, torn down %d, foreign %d, unverifiable %d, already gone %d, failed %d%s\n",
		r.Seen, r.Readopted, r.TornDown, r.Foreign, r.Unverifiable, r.AlreadyGone, r.Failed, by)
	for _, it := range r.Items {
		fmt.Fprintf(w, "  %s %s %s: %s\n", it.ID, it.Verdict, it.Action, Sanitize(it.Reason))
	}
}

// Status prints the daemon's status.
func Status(w io.Writer, st api.Status) {
	fmt.Fprintf(w, "pid %d, version %s, mechanism %s, up %s\nclaims %d (members %d), events %d, lost events %d, resyncs %d, members dropped %d\n",
		st.Pid, Sanitize(st.Version), st.Mechanism, time.Duration(st.UptimeSeconds)*time.Second,
		st.Claims, st.Members, st.Events, st.LostEvents, st.Resyncs, st.MembersLost)
	for _, k := range slices.Sorted(maps.Keys(st.Counts)) {
		for _, s := range slices.Sorted(maps.Keys(st.Counts[k])) {
			fmt.Fprintf(w, "  %s %s: %d\n", k, s, st.Counts[k][s])
		}
	}
	cg := st.Cgroup
	if cg == "" {
		cg = "none (" + st.CgroupReason + ")"
	}
	fmt.Fprintf(w, "cgroups: %s\nholders watched %d, store errors %d, poll failures %d, log lines dropped %d, with arguments withheld %d\n", Sanitize(cg), st.HoldersWatched, st.StoreErrors, st.PollFailures, st.LogDropped, st.LogWithheld)
	for _, e := range []string{st.LastStoreError, st.LastPollError, st.LastLogError} {
		if e != "" {
			fmt.Fprintf(w, "  last: %s\n", Sanitize(e))
		}
	}
	fmt.Fprint(w, "reconcile at start: ")
	Report(w, st.Reconcile)
}

// Release prints a released claim and the teardown that released it.
func Release(w io.Writer, res api.ReleaseResponse) {
	fmt.Fprintf(w, "%s %s", res.Claim.ID, res.Claim.State)
	if out := res.Outcome; out != nil {
		fmt.Fprintf(w, " (%s: %s; %d targeted, %d survivors, %d unproven)",
			out.Verdict.Result, Sanitize(out.Verdict.Reason), len(out.Targeted), len(out.Survivors), len(out.Unproven))
	}
	fmt.Fprintln(w)
}

// Outcome prints a teardown's outcome.
func Outcome(w io.Writer, out actions.Outcome) {
	v := out.Verdict
	fmt.Fprintf(w, "verdict:   %s (%s; by %s)\n", v.Result, Sanitize(v.Reason), v.Mechanism)
	if out.Error != "" {
		fmt.Fprintf(w, "error:     %s\n", Sanitize(out.Error))
	}
	if out.Acted {
		fmt.Fprintf(w, "members:   %d (found by %s)\nescalated: %v\n", len(out.Targeted), out.Mechanism, out.Escalated)
	} else {
		fmt.Fprintln(w, "action:    nothing signalled")
	}
	fmt.Fprintf(w, "dead:      %v\n", out.Dead)
	for _, m := range out.Survivors {
		fmt.Fprintf(w, "survivor:  %d %s\n", m.Pid, m.Token)
	}
	for _, m := range out.Unproven {
		fmt.Fprintf(w, "unproven:  %d %s (reported, not signalled: %s)\n", m.Pid, m.Token, Sanitize(m.Reason))
	}
	if out.Incomplete != "" {
		fmt.Fprintf(w, "incomplete: %s\n", Sanitize(out.Incomplete))
	}
}

// TreeOptions say what a tree's lines show beyond pid and comm.
type TreeOptions struct {
	// Tokens shows each process's start token.
	Tokens bool
	// Width cuts each line to this many columns (0: no cut).
	Width int
	// Cmdline, when set, gives the command line of a process whose node
	// carries none (Args) ("" when unknown).
	Cmdline func(pid int32, tok token.Token) string
}

// Tree prints a lineage tree like pstree under its ancestry (nearest
// ancestor first in ancestry), saying which mechanism knows it. A process
// that belongs to a claim shows the claim's id in brackets.
func Tree(w io.Writer, mech string, tree *lineage.TreeNode, ancestry []lineage.TreeNode, opt TreeOptions) {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	fmt.Fprintf(bw, "# lineage by %s\n", mech)
	if len(ancestry) > 0 {
		var b strings.Builder
		b.WriteString("# ancestry: ")
		for i := len(ancestry) - 1; i >= 0; i-- {
			b.WriteString(label(&ancestry[i]) + " > ")
		}
		b.WriteString(label(tree))
		fmt.Fprintln(bw, Cut(b.String(), opt.Width))
	}
	node(bw, tree, "", "", &opt)
}

func label(n *lineage.TreeNode) string {
	s := fmt.Sprintf("%d %s", n.Pid, Sanitize(n.Comm))
	if n.Root != "" {
		s += " [" + Sanitize(n.Root) + "]"
	}
	if n.Exited {
		s += " (exited)"
	}
	return s
}

func node(w io.Writer, n *lineage.TreeNode, first, rest string, opt *TreeOptions) {
	line := first + label(n)
	if opt.Tokens {
		line += "  " + n.Token.String()
	}
	switch {
	case n.Args != nil:
		line += "  " + Sanitize(strings.Join(n.Args, " "))
	case opt.Cmdline != nil && !n.Exited:
		if cmd := opt.Cmdline(n.Pid, n.Token); cmd != "" {
			line += "  " + Sanitize(cmd)
		}
	}
	fmt.Fprintln(w, Cut(line, opt.Width))
	for i, c := range n.Children {
		if i == len(n.Children)-1 {
			node(w, c, rest+"└─ ", rest+"   ", opt)
		} else {
			node(w, c, rest+"├─ ", rest+"│  ", opt)
		}
	}
}
