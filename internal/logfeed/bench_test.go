package logfeed

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// sampleExec is a typical exec event with a ticks+inode token.
func sampleExec() events.Event {
	boot := procfs.BootID{0x69, 0xe3, 0xb9, 0xae, 0x99, 0xf0, 0x4f, 0x10, 0xac, 0x05, 0x63, 0xc7, 0x56, 0x1c, 0x49, 0xfe}
	ev := events.Event{
		Kind: events.Exec, Mechanism: events.EBPF, Pid: 48213, PPid: 48200,
		Token:       token.Token{Boot: boot, Start: 8778712, Ino: 51745, Prec: token.Ticks},
		ParentToken: token.Token{Boot: boot, Start: 8778700, Ino: 51738, Prec: token.Ticks},
		Exe:         "/usr/bin/python3",
		Argv:        []string{"python3", "-m", "http.server", "--bind", "127.0.0.1", "8080"},
	}
	copy(ev.Comm[:], "python3")
	return ev
}

// sampleParented is sampleExec with a context and its parent described by
// the exec cache, as the daemon logs it.
func sampleParented() events.Event {
	ev := sampleExec()
	ev.Ctx = events.Context{Valid: true, UID: 1000, EUID: 1000, SID: 48000, PGID: 48200, NSPid: 48213, PidNS: 4026531836}
	ev.Exec = events.ExecInfo{Cwd: "/home/user/site", ArgsCount: 6}
	ev.Parent = &events.Desc{Exe: "/usr/bin/bash", Argv: []string{"bash", "-c", "python3 -m http.server --bind 127.0.0.1 8080"},
		Exec: events.ExecInfo{Cwd: "/home/user", ArgsCount: 3}, Ctx: ev.Ctx}
	copy(ev.Parent.Comm[:], "bash")
	return ev
}

// sampleTTY is sampleParented run from a terminal (/dev/pts/5).
func sampleTTY() events.Event {
	ev := sampleParented()
	ev.Ctx.TTY, ev.Ctx.TTYMajor, ev.Ctx.TTYMinor = true, 136, 5
	return ev
}

// sampleArgs4K is sampleParented with 4 KiB of arguments (64 of 64
// bytes), the long exec line of an exec storm.
func sampleArgs4K() events.Event {
	ev := sampleParented()
	ev.Argv = make([]string, 64)
	for i := range ev.Argv {
		ev.Argv[i] = fmt.Sprintf("--option-%02d=%s", i, strings.Repeat("v", 64-13))
	}
	ev.Exec.ArgsCount = len(ev.Argv)
	return ev
}

// BenchmarkEventLine measures what the event path pays per process event:
// encoding the line and queueing it (the drain goroutine writes it to
// io.Discard).
func BenchmarkEventLine(b *testing.B) {
	for _, bc := range []struct {
		name string
		ev   events.Event
	}{{SchemaECS, sampleExec()}, {SchemaOCSF, sampleExec()}, {SchemaECS + "/parent", sampleParented()}, {SchemaOCSF + "/parent", sampleParented()}, {SchemaOCSF + "/tty", sampleTTY()},
		{SchemaECS + "/args4k", sampleArgs4K()}, {SchemaOCSF + "/args4k", sampleArgs4K()}, {SchemaECS + "/parent/metered", sampleParented()}} {
		schema, _, _ := strings.Cut(bc.name, "/")
		b.Run(bc.name, func(b *testing.B) {
			// Unmetered but for the metered case (whose arguments are
			// too short to be withheld): a benchmark's millions of lines
			// a second would spend any user's share, and then measure
			// lines without their arguments.
			ub := int64(-1)
			if strings.HasSuffix(bc.name, "/metered") {
				ub = 0
			}
			l, err := New(Config{Schema: schema, Writer: io.Discard, ProcessEvents: AllKinds, Hostname: "vm", UserBytes: ub})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close(context.Background())
			ev := bc.ev
			// Give every slot of the ring its buffer first.
			for range 2 * DefaultBufferLines {
				l.Event(&ev)
			}
			l.Flush(context.Background())
			b.ReportAllocs()
			for b.Loop() {
				l.Event(&ev)
			}
			b.StopTimer()
			l.Flush(context.Background())
			st := l.Stats()
			b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
		})
	}
}

// BenchmarkFileSustained measures lines per second written to a file
// (rotation off): producers log as fast as they can, lines the file could
// not keep up with are dropped and counted.
func BenchmarkFileSustained(b *testing.B) {
	path := filepath.Join(b.TempDir(), "feed.log")
	l, err := New(Config{Output: "file:" + path, MaxFileBytes: -1, ProcessEvents: AllKinds})
	if err != nil {
		b.Fatal(err)
	}
	ev := sampleExec()
	start := time.Now()
	for b.Loop() {
		l.Event(&ev)
	}
	if err := l.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	st := l.Stats()
	b.ReportMetric(float64(st.Written)/elapsed.Seconds(), "written-lines/s")
	b.ReportMetric(float64(st.Dropped)/float64(b.N), "dropped/op")
}

// TestEventLineAllocs: logging a process event allocates nothing once the
// ring's buffers exist.
func TestEventLineAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items on purpose under the race detector")
	}
	for _, schema := range []string{SchemaECS, SchemaOCSF} {
		l, err := New(Config{Schema: schema, Writer: io.Discard, ProcessEvents: AllKinds, BufferLines: 64})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close(context.Background())
		for _, ev := range []events.Event{sampleExec(), sampleParented()} {
			for range 4 { // warm every slot of the ring
				for range 64 {
					l.Event(&ev)
				}
				flush(t, l)
			}
			allocs := testing.AllocsPerRun(1000, func() { l.Event(&ev) })
			if allocs != 0 {
				t.Errorf("%s: Event (parent %v) allocates %v times per line, want 0", schema, ev.Parent != nil, allocs)
			}
		}
	}
}

// BenchmarkProcLine measures encoding alone: the ECS line of a process
// event written into a reused procLine, without the queue.
func BenchmarkProcLine(b *testing.B) {
	h := newHost(Config{Hostname: "vm", Boot: sampleExec().Token.Boot})
	x := newECS(h)
	for _, bc := range []struct {
		name string
		ev   events.Event
	}{{"exec", sampleExec()}, {"parent", sampleParented()}, {"args4k", sampleArgs4K()}} {
		b.Run(bc.name, func(b *testing.B) {
			var w procLine
			ev := bc.ev
			b.ReportAllocs()
			for b.Loop() {
				w.b = w.b[:0]
				x.procEvent(&w, ActionProcessExec, &ev)
			}
			b.SetBytes(int64(len(w.b)))
		})
	}
	// A storm: a new child of one parent each line, as its exec.
	b.Run("storm", func(b *testing.B) {
		var w procLine
		ev := sampleParented()
		b.ReportAllocs()
		for b.Loop() {
			ev.Pid++
			ev.Token.Ino++
			ev.Ctx.NSPid = ev.Pid
			w.b = w.b[:0]
			x.procEvent(&w, ActionProcessExec, &ev)
		}
		b.SetBytes(int64(len(w.b)))
	})
}
