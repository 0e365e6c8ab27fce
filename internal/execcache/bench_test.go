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
// per op must stay 0 (each exec is copied into the buffers of the slot it
// takes, which an evicted entry left).
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
// and reports the heap it holds per entry, its copies of the strings
// included (B/entry), and the part that is the cache's own (slot and map).
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

// BenchmarkObserveStorm measures an exec storm through the cache as the
// daemon runs it: per op one child's fork, exec and exit, at pids handed
// out in turn over a window of 32768, children of one parent, with the
// exec's strings allocated as the eBPF decoder allocates them (one string
// for paths and arguments, split into the argv slice) and retained by the
// cache until evicted. "few" has 4 short arguments, "4KiB" 64 arguments of
// 63 bytes.
func BenchmarkObserveStorm(b *testing.B) {
	for _, bc := range []struct {
		name string
		args string
	}{
		{"few", "worker\x00--jobs=4\x00--verbose\x00input.txt\x00"},
		{"4KiB", strings.Repeat(strings.Repeat("a", 63)+"\x00", 64)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const pids = 32768
			paths := "/usr/bin/worker/home/user/project"
			whole := paths + bc.args
			c := New(Config{})
			parent := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 1, Token: tok(1, 1),
				Exe: "/usr/bin/storm", Argv: []string{"storm"}, Ctx: events.Context{Valid: true}}
			c.Observe(&parent)
			step := func(k int) {
				pid := int32(300 + k%pids)
				tk := token.Token{Start: uint64(k) + 10, Ino: uint64(k) + 10, Prec: token.Ticks}
				fork := events.Event{Kind: events.Fork, Mechanism: events.EBPF, Pid: pid, Token: tk, PPid: 1, ParentToken: parent.Token,
					Ctx: events.Context{Valid: true, UID: 1000}}
				c.Observe(&fork)
				if fork.Parent == nil {
					b.Fatal("parent evicted")
				}
				s := strings.Clone(whole) // the decoder's one string
				ev := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: pid, Token: tk, PPid: 1, ParentToken: parent.Token,
					Exe: s[:15], Argv: events.SplitArgString(s[len(paths):]), Exec: events.ExecInfo{Cwd: s[15:len(paths)]}, Ctx: fork.Ctx}
				c.Observe(&ev)
				exit := events.Event{Kind: events.Exit, Mechanism: events.EBPF, Pid: pid, Token: tk, PPid: 1, ParentToken: parent.Token}
				c.Observe(&exit)
				if k%1024 == 0 {
					c.Observe(&parent) // the parent stays recent
				}
			}
			for k := range 2 * pids {
				step(k)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for k := 2 * pids; b.Loop(); k++ {
				step(k)
			}
		})
	}
}
