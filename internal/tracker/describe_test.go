package tracker

import (
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/execcache"
	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/token"
)

// BenchmarkDescribe is describe's cost for a fork whose parent's exec the
// cache did not see: the parent is named from the graph.
func BenchmarkDescribe(b *testing.B) {
	ptok := token.Token{Start: 10, Ino: 10, Prec: token.Ticks}
	t := &Tracker{graph: lineage.New(lineage.Config{}), opts: Options{Execs: execcache.New(execcache.Config{})}}
	parent := events.Event{Kind: events.Fork, Pid: 10, PPid: 1, Token: ptok, Time: 1, Comm: [16]byte{'s', 'h'}}
	t.graph.Apply(&parent)
	child := events.Event{Kind: events.Fork, Pid: 11, PPid: 10, Token: token.Token{Start: 11, Ino: 11, Prec: token.Ticks}, ParentToken: ptok, Time: 2}
	t.graph.Apply(&child)
	b.ReportAllocs()
	for b.Loop() {
		ev := child
		t.describe(&ev)
		if ev.Parent == nil || ev.Parent.Comm != parent.Comm {
			b.Fatalf("parent %+v", ev.Parent)
		}
	}
}
