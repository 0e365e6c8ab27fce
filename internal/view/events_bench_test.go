package view

import (
	"io"
	"testing"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// BenchmarkEventPrinterJSON is what `events --json` costs per event on a
// local mechanism, unfiltered and filtered.
func BenchmarkEventPrinterJSON(b *testing.B) {
	tok := token.Token{Prec: token.Ticks, Start: 123456, Ino: 789}
	ev := events.Event{Kind: events.Exec, Mechanism: events.EBPF, Pid: 4242, PPid: 1, Token: tok, ParentToken: tok,
		Exe: "/usr/bin/true", Argv: []string{"/usr/bin/true", "--flag=value", "xyz"}}
	copy(ev.Comm[:], "true")
	for _, o := range []struct {
		name string
		opt  EventOptions
	}{{"all", EventOptions{JSON: true}}, {"kind", EventOptions{JSON: true, Kinds: "exec"}}} {
		b.Run(o.name, func(b *testing.B) {
			p, err := NewEventPrinter(io.Discard, o.opt)
			if err != nil {
				b.Fatal(err)
			}
			p.Start()
			defer p.Close()
			b.ReportAllocs()
			for b.Loop() {
				p.Event(&ev)
			}
		})
	}
}
