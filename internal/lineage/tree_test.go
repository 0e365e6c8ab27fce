package lineage

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// shape renders a tree compactly: "pid" with "x" when exited, "@root" when
// it has one, then its children in braces.
func shape(n *TreeNode) string {
	var b strings.Builder
	var walk func(*TreeNode)
	walk = func(n *TreeNode) {
		fmt.Fprint(&b, n.Pid)
		if n.Exited {
			b.WriteByte('x')
		}
		if n.Root != "" {
			b.WriteString("@" + n.Root)
		}
		if len(n.Children) > 0 {
			b.WriteString(" {")
			for i, c := range n.Children {
				if i > 0 {
					b.WriteByte(' ')
				}
				walk(c)
			}
			b.WriteByte('}')
		}
	}
	walk(n)
	return b.String()
}

func TestTree(t *testing.T) {
	initTok, shell := tk(1, 1), tk(100, 50)
	a, b, c, d := tk(200, 61), tk(201, 62), tk(202, 63), tk(203, 64)
	cases := []struct {
		name  string
		evs   []events.Event
		admit int32 // the pid admitted as root "job", 0 for none
		root  int32
		want  string
	}{
		{
			name: "leaf",
			root: 10,
			want: "10",
		},
		{
			name: "children in pid order",
			evs:  []events.Event{fork(13, c, 10, shell, 0), fork(11, a, 10, shell, 0), fork(12, b, 11, a, 0)},
			root: 10,
			want: "10 {11 {12} 13}",
		},
		{
			name: "an exited middle process links an adopted grandchild",
			evs:  []events.Event{fork(11, a, 10, shell, 0), fork(12, b, 11, a, 0), exit(11, a, 0, 0)},
			root: 10,
			want: "10 {11x {12}}",
		},
		{
			name: "exited ancestors two deep",
			evs: []events.Event{fork(11, a, 10, shell, 0), fork(12, b, 11, a, 0), fork(13, c, 12, b, 0),
				fork(14, d, 10, shell, 0), exit(11, a, 0, 0), exit(12, b, 0, 0)},
			root: 10,
			want: "10 {11x {12x {13}} 14}",
		},
		{
			name: "an exited leaf is left out",
			evs:  []events.Event{fork(11, a, 10, shell, 0), fork(12, b, 10, shell, 0), exit(12, b, 0, 0)},
			root: 10,
			want: "10 {11}",
		},
		{
			name:  "roots of an admitted claim",
			evs:   []events.Event{fork(11, a, 10, shell, 0), fork(12, b, 11, a, 0)},
			admit: 11,
			root:  10,
			want:  "10 {11@job {12@job}}",
		},
		{
			name: "from the top",
			evs:  []events.Event{fork(11, a, 10, shell, 0)},
			root: 1,
			want: "1 {10 {11}}",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newTestGraph(newClock(), Config{})
			g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(10, shell, 1, initTok)})
			apply(g, c.evs...)
			if c.admit != 0 {
				n, _ := g.Live(c.admit)
				if err := g.Admit(n.Pid, n.Token, "job"); err != nil {
					t.Fatalf("Admit(%d) error %v", c.admit, err)
				}
			}
			root, ok := g.Live(c.root)
			if !ok {
				t.Fatalf("Live(%d) not found", c.root)
			}
			if got := shape(g.Tree(root)); got != c.want {
				t.Errorf("Tree(%d) = %s, want %s", c.root, got, c.want)
			}
		})
	}
}

func TestTreeOf(t *testing.T) {
	initTok, shell, a, b := tk(1, 1), tk(100, 50), tk(200, 61), tk(201, 62)
	g := newTestGraph(newClock(), Config{})
	g.Seed([]events.Proc{proc(1, initTok, 0, token.Token{}), proc(10, shell, 1, initTok)})
	apply(g, fork(11, a, 10, shell, 0), fork(12, b, 11, a, 0), fork(13, tk(202, 63), 12, b, 0), exit(11, a, 0, 0))
	tree, anc, ok := g.TreeOf(12)
	if !ok {
		t.Fatal("TreeOf(12) not found")
	}
	var got []string
	for _, n := range anc {
		got = append(got, shape(&n))
	}
	if s, want := strings.Join(got, " "), "11x 10 1"; s != want {
		t.Errorf("TreeOf(12) ancestry = %s, want %s (nearest first, exited marked)", s, want)
	}
	if s, want := shape(tree), "12 {13}"; s != want {
		t.Errorf("TreeOf(12) tree = %s, want %s", s, want)
	}
	if _, _, ok := g.TreeOf(11); ok {
		t.Error("TreeOf(11) of an exited process found, want not found")
	}
}

func TestTreeNode(t *testing.T) {
	g := newTestGraph(newClock(), Config{})
	shell, child := tk(100, 50), tk(200, 61)
	g.Seed([]events.Proc{proc(10, shell, 1, token.Token{})})
	apply(g, fork(11, child, 10, shell, 0), exit(11, child, 0, 0), fork(12, token.Token{}, 10, shell, 0))
	cases := []struct {
		pid  int32
		tok  token.Token
		want TreeNode
	}{
		{10, shell, TreeNode{Pid: 10, PPid: 1, Token: shell, Comm: "p10"}},
		{11, child, TreeNode{Pid: 11, PPid: 10, Token: child, Comm: "p11", Exited: true, BornObserved: true}},
		{12, token.Token{}, TreeNode{Pid: 12, PPid: 10, Comm: "p12", BornObserved: true}},
	}
	for _, c := range cases {
		n, _, ok := g.Find(c.pid, c.tok)
		if c.tok.IsZero() {
			n, ok = g.Live(c.pid)
		}
		if !ok {
			t.Fatalf("Find(%d) not found", c.pid)
		}
		if got := g.TreeNode(n); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("TreeNode(%d) = %+v, want %+v", c.pid, got, c.want)
		}
	}
}

func TestArrange(t *testing.T) {
	node := func(pid, ppid int32) TreeNode { return TreeNode{Pid: pid, PPid: ppid} }
	cases := []struct {
		name string
		flat []TreeNode
		want string
	}{
		{"empty", nil, "0"},
		{"root only", []TreeNode{node(10, 1)}, "10"},
		{"under their parents, in list order", []TreeNode{node(10, 1), node(12, 10), node(11, 10), node(13, 12)}, "10 {12 {13} 11}"},
		{"a parent not in the list", []TreeNode{node(10, 1), node(20, 99)}, "10 {20}"},
		{"a node its own parent", []TreeNode{node(10, 1), node(20, 20)}, "10 {20}"},
		{"a child listed before its parent", []TreeNode{node(10, 1), node(13, 12), node(12, 10)}, "10 {12 {13}}"},
	}
	for _, c := range cases {
		if got := shape(Arrange(c.flat)); got != c.want {
			t.Errorf("Arrange(%s) = %s, want %s", c.name, got, c.want)
		}
	}
}

func TestArrangeKeepsTheInput(t *testing.T) {
	flat := []TreeNode{{Pid: 10, Root: "job"}, {Pid: 11, PPid: 10, Token: tk(5, 6), Comm: "c", Exited: true, BornObserved: true}}
	tree := Arrange(flat)
	if len(flat[0].Children) != 0 {
		t.Errorf("Arrange changed its input: %+v", flat[0])
	}
	if got, want := *tree.Children[0], flat[1]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Arrange child = %+v, want %+v", got, want)
	}
	if tree.Root != "job" {
		t.Errorf("Arrange root = %+v, want Root job", tree)
	}
}

// TestTreeNodeJSON pins the field names the CLI and the API print, and
// checks that the daemon's flat answer decodes to what it encoded.
func TestTreeNodeJSON(t *testing.T) {
	tok := tk(4200, 77)
	text := tok.String()
	cases := []struct {
		n    TreeNode
		want string
	}{
		{TreeNode{Pid: 10, PPid: 1, Token: tok, Comm: "sh", BornObserved: true},
			`{"pid":10,"ppid":1,"token":"` + text + `","comm":"sh","born_observed":true}`},
		{TreeNode{Pid: 10, Exited: true, Root: "job", Children: []*TreeNode{{Pid: 11}}},
			`{"pid":10,"ppid":0,"token":"","comm":"","exited":true,"born_observed":false,"root":"job","children":[{"pid":11,"ppid":0,"token":"","comm":"","born_observed":false}]}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.n)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); got != c.want {
			t.Errorf("json.Marshal(%+v) = %s, want %s", c.n, got, c.want)
		}
	}
	flat := []TreeNode{{Pid: 10, Token: tok, Root: "job"}, {Pid: 11, PPid: 10, Comm: "x", Exited: true}}
	b, err := json.Marshal(flat)
	if err != nil {
		t.Fatal(err)
	}
	var got []TreeNode
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("json.Unmarshal(%s) error %v", b, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(flat) {
		t.Errorf("json.Unmarshal(%s) = %+v, want %+v", b, got, flat)
	}
}
