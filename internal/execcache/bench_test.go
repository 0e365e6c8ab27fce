package execcache

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// storm returns n exec events of distinct instances with a few arguments,
// their strings allocated as a source allocates them (one for the paths,
// one for the arguments).
func storm(n int) []events.Event {
	evs := make([]events.Event, n)
	for i := range evs {
		pid := int32(1000 + i)
		paths := strings.Clone("/usr/bin/worker/home/user/project" + strconv.Itoa(i))
		args := strings.Clone("worker\x00--jobs=4\x00--verbose\x00input-" + strconv.Itoa(i) + ".txt")
		evs[i] = events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: pid, PPid: 1,
			Token: token.Token{Start: uint64(i) + 1, Ino: uint64(i) + 1, Prec: token.Ticks}, ParentToken: tok(1, 1),
			Exe: paths[:15], Argv: strings.Split(args, "\x00"), Exec: events.ExecInfo{Cwd: paths[15:], ArgsCount: 4},
			Ctx: events.Context{Valid: true}}
	}
	return evs
}

// BenchmarkObserve measures one fork, exec and exit through the cache in
// its steady state (full, evicting), with the parent found: allocations
// per op must stay 0 (the strings are the source's).
func BenchmarkObserve(b *testing.B) {
	const n = 1 << 14
	evs := storm(n)
	c := New(Config{Entries: n / 2})
	parent := evs[0]
	parent.Pid, parent.Token = 1, tok(1, 1)
	for i := range evs {
		c.Observe(&evs[i])
	}
	c.Observe(&parent)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ev := evs[i%n]
		fork := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: ev.Pid, Token: ev.Token, PPid: 1, ParentToken: parent.Token, Ctx: ev.Ctx}
		c.Observe(&fork)
		if fork.Parent == nil {
			b.Fatal("parent evicted")
		}
		c.Observe(&ev)
		exit := events.Event{Kind: events.Exit, Mechanism: events.EBPF, Pid: ev.Pid, Token: ev.Token, PPid: 1, ParentToken: parent.Token}
		c.Observe(&exit)
		// Keep the parent live and recent: it execs again now and then.
		if i%1024 == 0 {
			c.Observe(&parent)
		}
	}
}

// BenchmarkMemory fills a default cache with DefaultEntries descriptions
// and reports the heap it holds per entry, the source's strings included
// (B/entry), and the part that is the cache's own (slot and map).
func BenchmarkMemory(b *testing.B) {
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := New(Config{})
		evs := storm(DefaultEntries)
		for i := range evs {
			c.Observe(&evs[i])
		}
		// evs is dead here: only the cache keeps the strings.
		runtime.GC()
		runtime.ReadMemStats(&after)
		st := c.Stats()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Entries), "B/entry")
		b.ReportMetric(float64(st.Bytes)/float64(st.Entries), "charged-B/entry")
		runtime.KeepAlive(c)
	}
}
