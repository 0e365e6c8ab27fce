package lineage

import (
	"cmp"
	"slices"

	"github.com/procsupervisor/supervisor/internal/token"
)

// TreeNode is one process of a lineage tree, in the shape both the daemon's
// API and the CLI print. Token marshals as its text form; it is zero ("")
// for a node whose start time the graph never learned (a fork reported
// after the process was gone).
type TreeNode struct {
	Pid          int32       `json:"pid"`
	PPid         int32       `json:"ppid"`
	Token        token.Token `json:"token"`
	Comm         string      `json:"comm"`
	Exited       bool        `json:"exited,omitempty"`
	BornObserved bool        `json:"born_observed"`
	// Root is the id of the admitted root (a claim) the process belongs
	// to, "" when none.
	Root string `json:"root,omitempty"`
	// Args, when set, is the command line of a live process as its
	// producer (the daemon) read it, with what its redaction patterns
	// match replaced; ArgsRedacted says that they matched.
	Args         []string `json:"args,omitempty"`
	ArgsRedacted bool     `json:"args_redacted,omitempty"`
	// DescendantsCut, on the first node of an answer its producer cut
	// (the daemon lists at most api.MaxTreeNodes), counts the live
	// descendants left out.
	DescendantsCut int         `json:"descendants_cut,omitempty"`
	Children       []*TreeNode `json:"children,omitempty"`
}

// TreeNode returns n as a TreeNode without children, with the root it
// belongs to in g.
func (g *Graph) TreeNode(n Node) TreeNode {
	root, _, _ := g.RootOf(n.Pid, n.Token)
	return TreeNode{Pid: n.Pid, PPid: n.PPid, Token: n.Token, Comm: n.CommString(),
		Exited: !n.Live(), BornObserved: n.Flags.Has(BornObserved), Root: root}
}

// TreeNodes returns ns as TreeNodes, in the same order.
func (g *Graph) TreeNodes(ns []Node) []TreeNode {
	out := make([]TreeNode, 0, len(ns))
	for _, n := range ns {
		out = append(out, g.TreeNode(n))
	}
	return out
}

// Tree arranges root's live descendants under their birth parents, with
// the exited ancestors that link them to root, children in pid order.
func (g *Graph) Tree(root Node) *TreeNode {
	type key struct {
		pid int32
		tok token.Token
	}
	top := g.TreeNode(root)
	byKey := map[key]*TreeNode{{root.Pid, root.Token}: &top}
	desc, _ := g.Descendants(root.Pid, root.Token)
	pending := slices.Clone(desc)
	for _, n := range desc {
		tn := g.TreeNode(n)
		byKey[key{n.Pid, n.Token}] = &tn
	}
	// Descendants returns live nodes only: bring in the exited ones
	// between each and its nearest ancestor already in the tree.
	for _, n := range desc {
		if _, ok := byKey[key{n.PPid, n.ParentToken}]; ok {
			continue
		}
		anc, _ := g.Ancestors(n.Pid, n.Token)
		for _, a := range anc {
			k := key{a.Pid, a.Token}
			if _, ok := byKey[k]; ok {
				break
			}
			tn := g.TreeNode(a)
			byKey[k] = &tn
			pending = append(pending, a)
		}
	}
	for _, n := range pending {
		child := byKey[key{n.Pid, n.Token}]
		if parent, ok := byKey[key{n.PPid, n.ParentToken}]; ok && parent != child {
			parent.Children = append(parent.Children, child)
		}
	}
	top.sort()
	return &top
}

// TreeOf returns the tree under the live process at pid (Tree) and its
// birth ancestry, nearest first: what a local `supervisor tree PID` prints.
// ok is false when no live process holds pid.
func (g *Graph) TreeOf(pid int32) (tree *TreeNode, ancestry []TreeNode, ok bool) {
	root, ok := g.Live(pid)
	if !ok {
		return nil, nil, false
	}
	anc, _ := g.Ancestors(root.Pid, root.Token)
	return g.Tree(root), g.TreeNodes(anc), true
}

// Arrange builds a tree from a flat list: the first node is the root, the
// others go under their parent by pid, or under the root when their parent
// is not in the list. It is the inverse of the daemon's answer, which lists
// a process and then its live descendants. An empty list gives an empty
// node.
func Arrange(flat []TreeNode) *TreeNode {
	if len(flat) == 0 {
		return &TreeNode{}
	}
	all := make([]*TreeNode, len(flat))
	byPid := make(map[int32]*TreeNode, len(flat))
	for i := range flat {
		n := flat[i]
		n.Children = nil
		all[i] = &n
		byPid[n.Pid] = &n
	}
	for _, n := range all[1:] {
		if p, ok := byPid[n.PPid]; ok && p != n {
			p.Children = append(p.Children, n)
		} else {
			all[0].Children = append(all[0].Children, n)
		}
	}
	return all[0]
}

// sort orders the children of n and of every node below it by pid.
func (n *TreeNode) sort() {
	slices.SortStableFunc(n.Children, func(a, b *TreeNode) int { return cmp.Compare(a.Pid, b.Pid) })
	for _, c := range n.Children {
		c.sort()
	}
}
