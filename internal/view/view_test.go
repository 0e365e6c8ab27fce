package view

import (
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// TestTable aligns columns two spaces apart and keeps control characters,
// tabs among them, out of the terminal and out of the column layout.
func TestTable(t *testing.T) {
	var b strings.Builder
	table(&b, [][]string{{"ID", "OWNER", "COMMAND"}, {"g-1", "a\tb\x1b[2J", "sleep 1"}})
	want := "ID   OWNER    COMMAND\n" +
		"g-1  a?b?[2J  sleep 1\n"
	if got := b.String(); got != want {
		t.Errorf("table = %q, want %q", got, want)
	}
}

// TestNoEscapes: a workload's or a user's strings (owner, argv, comm,
// reasons) reach no terminal raw, in any view.
func TestNoEscapes(t *testing.T) {
	const esc = "\x1b[41mred\u009b2J"
	var b strings.Builder
	Claims(&b, []api.Claim{{ID: "g-1", Owner: esc, Argv: []string{esc}}}, time.Now())
	Show(&b, api.Claim{ID: "g-1", Owner: esc, Argv: []string{esc}, State: "retired", RetiredReason: esc}, time.Now())
	Verdict(&b, verdict.Verdict{Reason: esc, Mechanism: esc})
	Report(&b, api.Report{Items: []api.ReportItem{{ID: "g-1", Reason: esc}}})
	Status(&b, api.Status{Version: esc, LastStoreError: esc, Reconcile: api.Report{Items: []api.ReportItem{{Reason: esc}}}})
	Outcome(&b, actions.Outcome{Verdict: verdict.Verdict{Reason: esc}, Error: esc, Unproven: []actions.Member{{Pid: 7, Reason: esc}}})
	Release(&b, api.ReleaseResponse{Outcome: &actions.Outcome{Verdict: verdict.Verdict{Reason: esc}}})
	child := &lineage.TreeNode{Pid: 2, Comm: esc}
	Tree(&b, "proc", &lineage.TreeNode{Pid: 1, Comm: esc, Root: esc, Children: []*lineage.TreeNode{child}}, []lineage.TreeNode{{Pid: 0, Comm: esc}},
		TreeOptions{Cmdline: func(int32, token.Token) string { return esc }})
	out := b.String()
	if strings.ContainsAny(out, "\x1b\u009b") {
		t.Errorf("a view wrote a terminal escape:\n%q", out)
	}
	if strings.Count(out, "?[41mred?2J") < 18 {
		t.Errorf("the sanitized strings are missing from the views:\n%s", out)
	}
}

// TestSanitize: what a terminal would act on, or show as other than it
// is, is shown as '?': C0 and C1 controls and DEL, the bidirectional
// controls that reorder what follows them (an owner of "\u202eevil" showed
// reversed in root's list), the other format characters, spaces but ' '
// (an argument padded with NBSPs wrapped into a fake line) and the line
// and paragraph separators.
func TestSanitize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain ünïcode 日本", "plain ünïcode 日本"},
		{"a\x1b[31mred\x07", "a?[31mred?"},
		{"del\x7f c1\u009b", "del? c1?"},
		{"\u202eevil", "?evil"},
		{"\u2066iso\u2069 \u200fmark\u061c", "?iso? ?mark?"},
		{"nbsp\u00a0ideographic\u3000em\u2003thin\u2009narrow\u202fogham\u1680", "nbsp?ideographic?em?thin?narrow?ogham?"},
		{"line\u2028para\u2029", "line?para?"},
		{"zw\u200bsp\u200cnj\u200dj\u2060wj\ufeffbom\u00adshy", "zw?sp?nj?j?wj?bom?shy"},
		{"tag\U000e0041", "tag?"},
	} {
		if got := Sanitize(tc.in); got != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
