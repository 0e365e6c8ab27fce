package lineage

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// fuzzOp is the size of one operation in FuzzApply's input:
//
//	b[0] op: 0 fork, 1 exec, 2 exit, 3 lost, 4 seed/resync, 5 expire
//	b[1] pid (1..16), b[2] ppid (0..16), b[3] start ticks, b[4] inode
//	b[5] bits: 1 zero token, 2 zero parent token, 4 inferred, 8 no time,
//	     16 no inode, 32 parent token from another instance
//	b[6] boottime in 10 ms steps, or clock advance in seconds for op 5
//	b[7] exit status, or scan mask for op 4
const fuzzOp = 8

const (
	fuzzMaxExited = 8
	fuzzMaxPinned = 4
)

// decodeOps turns a byte string into graph operations.
func decodeOps(b []byte, g *Graph, c *clock) []func() {
	var ops []func()
	for ; len(b) >= fuzzOp; b = b[fuzzOp:] {
		op := b[0] % 6
		pid := int32(b[1]%16) + 1
		ppid := int32(b[2] % 17)
		bits := b[5]
		tok := tk(uint64(b[3]%32), uint64(b[4]%8))
		if bits&16 != 0 {
			tok.Ino = 0
		}
		if bits&1 != 0 {
			tok = token.Token{}
		}
		ptok := tk(uint64(b[2]%32)/2, 0)
		if bits&2 != 0 {
			ptok = token.Token{}
		}
		if bits&32 != 0 {
			ptok.Start++
		}
		var tm uint64
		if bits&8 == 0 {
			tm = uint64(b[6]) * tickNs * 2
		}
		ev := events.Event{Pid: pid, PPid: ppid, Token: tok, ParentToken: ptok, Time: tm, Inferred: bits&4 != 0, Status: uint32(b[7])}
		switch op {
		case 0:
			ev.Kind = events.Fork
		case 1:
			ev.Kind = events.Exec
		case 2:
			ev.Kind = events.Exit
		case 3:
			ev = events.Event{Kind: events.Lost, Count: uint64(b[7])}
		case 4:
			mask := uint32(b[7]) | uint32(b[4])<<8
			var procs []events.Proc
			for p := int32(1); p <= 16; p++ {
				if mask&(1<<(p-1)) != 0 {
					procs = append(procs, proc(p, tk(uint64(b[3]%32)+uint64(p%3), 0), (p*int32(b[6]))%17, tk(uint64(b[6]%32), 0)))
				}
			}
			if bits&1 != 0 {
				ops = append(ops, func() { g.Seed(procs) })
			} else {
				ops = append(ops, func() { g.Resync(procs) })
			}
			continue
		case 5:
			d := time.Duration(b[6]) * time.Second
			ops = append(ops, func() { c.Advance(d); g.Expire() })
			continue
		}
		ops = append(ops, func() { g.Apply(&ev) })
	}
	return ops
}

func FuzzApply(f *testing.F) {
	f.Add([]byte{
		0, 1, 0, 1, 1, 0, 1, 0, // fork 2? (pid 2) from 0
		0, 2, 2, 2, 2, 0, 2, 0, // fork 3 from 2
		2, 2, 0, 2, 2, 0, 3, 0, // exit 3
		3, 0, 0, 0, 0, 0, 0, 5, // lost
		4, 0, 0, 2, 0, 0, 1, 7, // resync
	})
	f.Add([]byte{
		2, 5, 0, 9, 3, 0, 9, 0, // exit before fork
		0, 5, 1, 9, 3, 0, 5, 0,
		0, 5, 1, 3, 1, 0, 2, 0, // older instance, late
		2, 5, 0, 0, 0, 1, 4, 1, // zero-token exit by time
		5, 0, 0, 0, 0, 0, 200, 0,
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		// The invariant check walks the whole graph after every op, so
		// cost grows with the square of the input: 512 ops are plenty to
		// reach every state, and keep each run short.
		if len(b) > 512*8 {
			b = b[:512*8]
		}
		c := newClock()
		g := newTestGraph(c, Config{MaxExited: fuzzMaxExited, MaxPinned: fuzzMaxPinned, MaxExitedAge: time.Minute})
		for k, op := range decodeOps(b, g, c) {
			op()
			if err := g.check(); err != nil {
				t.Fatalf("op %d: %v", k, err)
			}
			s := g.Stats()
			if l := g.Len(); l > s.Live+fuzzMaxExited+fuzzMaxPinned || l != s.Live+s.Exited {
				t.Fatalf("op %d: Len() = %d with %d live, %d exited", k, l, s.Live, s.Exited)
			}
			// Queries terminate and agree with the graph.
			for pid := int32(1); pid <= 16; pid++ {
				n, ok := g.Live(pid)
				if !ok {
					continue
				}
				if n.Pid != pid || !n.Live() {
					t.Fatalf("op %d: Live(%d) = %+v", k, pid, n)
				}
				if d, err := g.Descendants(pid, n.Token); err == nil {
					for _, x := range d {
						if !x.Live() {
							t.Fatalf("op %d: Descendants(%d) holds exited %d", k, pid, x.Pid)
						}
					}
				}
				if a, err := g.Ancestors(pid, n.Token); err == nil && len(a) > g.Len() {
					t.Fatalf("op %d: Ancestors(%d) has %d nodes, graph %d", k, pid, len(a), g.Len())
				}
			}
		}
	})
}

// TestFuzzCorpusDecodes keeps the seed corpus meaningful: every file in
// testdata/fuzz/FuzzApply decodes to at least one operation.
func TestFuzzCorpusDecodes(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzApply/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed corpus: %v", err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		_, arg, ok := strings.Cut(string(b), "[]byte(")
		if !ok {
			t.Fatalf("%s: not a fuzz corpus file", name)
		}
		s, err := strconv.Unquote(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(arg), ")")))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := newClock()
		if ops := decodeOps([]byte(s), newTestGraph(c, Config{}), c); len(ops) == 0 {
			t.Errorf("%s decodes to no operation", name)
		}
	}
}
