package events

import (
	"bytes"
	"testing"
	"time"
)

// encoderTimes are line times an Encoder must write as RFC3339Nano does:
// fractions with and without trailing zeros, whole seconds, the same
// second again, years outside four digits.
var encoderTimes = []time.Time{
	time.Unix(1_767_323_045, 123_456_789),
	time.Unix(1_767_323_045, 120_000_000),
	time.Unix(1_767_323_045, 0),
	time.Unix(1_767_323_046, 1),
	time.Unix(1_767_323_046, 100),
	time.Date(12000, 1, 2, 3, 4, 5, 6, time.UTC),
	time.Date(-1, 1, 2, 3, 4, 5, 0, time.UTC),
	time.Unix(0, 0),
	time.Unix(1_767_323_045, 999_999_999).In(time.FixedZone("x", 3600)),
}

// encoderOmits are the omit sets the daemon's stream uses.
var encoderOmits = []Omit{0, OmitInteractive | OmitPidNS | OmitMntNS, OmitParentToken | OmitSessionLeaderID | OmitGroupLeaderID | OmitParentInteractive, 0x7f}

// encoderEvent returns a variation of encodeCases[k] chosen by v: its
// namespace pid, a user id, a parent's namespace pid or the group leader
// changed, so that the texts an Encoder keeps are met again, almost met
// and not met.
func encoderEvent(k, v int) Event {
	ev := encodeCases[k%len(encodeCases)].ev
	// Every case's image has a number (its own and its parent's), as the
	// exec cache gives them; some variations keep it on other arguments
	// (a consumer that withheld or rewrote them).
	ev.Exec.Image = uint64(k%len(encodeCases))*2 + 1
	if ev.Parent != nil {
		p := *ev.Parent
		p.Exec.Image = ev.Exec.Image + 1
		ev.Parent = &p
	}
	switch v % 8 {
	case 5:
		ev.Argv = nil
	case 6:
		ev.Argv = append([]string{"other"}, ev.Argv...)
	case 7:
		if ev.Parent != nil {
			p := *ev.Parent
			p.Argv = append([]string(nil), p.Argv...)
			if len(p.Argv) > 0 {
				p.Argv[0] = "rewritten"
			}
			ev.Parent = &p
		}
		ev.Exec.ArgsTruncated = !ev.Exec.ArgsTruncated
	}
	switch v % 5 {
	case 1:
		ev.Ctx.NSPid += 7
	case 2:
		ev.Ctx.EUID++
	case 3:
		if ev.Parent != nil {
			p := *ev.Parent
			p.Ctx.NSPid++
			ev.Parent = &p
		}
	case 4:
		ev.Ctx.GroupLeader.Start++
		if ev.Parent != nil {
			p := *ev.Parent
			p.Ctx.GroupLeader.Ino++
			ev.Parent = &p
		}
	}
	return ev
}

// checkEncoder encodes events chosen by ops with one Encoder, in turn,
// and fails at the first line that differs from AppendJSONTime's.
func checkEncoder(t *testing.T, ops []byte) {
	t.Helper()
	var e Encoder
	var got, want []byte
	for i := 0; i+3 < len(ops); i += 4 {
		ev := encoderEvent(int(ops[i]), int(ops[i+1]))
		o := encoderOmits[int(ops[i+2])%len(encoderOmits)]
		wall := encoderTimes[int(ops[i+3])%len(encoderTimes)]
		got = e.AppendJSONTime(got[:0], &ev, o, wall)
		want = AppendJSONTime(want[:0], &ev, o, wall)
		if !bytes.Equal(got, want) {
			t.Fatalf("line %d (case %d, variation %d, omit %#x, time %v):\n got %s\nwant %s", i/4, ops[i], ops[i+1], o, wall, got, want)
		}
	}
}

// TestEncoder writes every case in each variation, omit set and time, in
// an order that meets each kept text again and in between others.
func TestEncoder(t *testing.T) {
	var ops []byte
	for round := range 3 {
		for k := range encodeCases {
			for v := range 8 {
				for o := range encoderOmits {
					ops = append(ops, byte(k), byte(v+round), byte(o), byte(k+v+o+round))
				}
			}
		}
	}
	checkEncoder(t, ops)
}

// FuzzEncoder checks an Encoder against AppendJSONTime over sequences of
// events, omit sets and times.
func FuzzEncoder(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 2, 0, 0, 0, 2, 1, 0, 1, 3, 3, 2, 2, 2, 2, 0, 0})
	f.Add([]byte{3, 4, 1, 5, 3, 4, 1, 6, 2, 2, 3, 2, 2, 2, 3, 2})
	f.Fuzz(func(t *testing.T, ops []byte) { checkEncoder(t, ops) })
}

// BenchmarkEncoder is BenchmarkAppendJSONTime through an Encoder, over a
// storm's lines: the same context and parent, another pid each line.
func BenchmarkEncoder(b *testing.B) {
	var e Encoder
	benchStorm(b, e.AppendJSONTime)
}

// BenchmarkEncoderNone is BenchmarkEncoder without the kept texts.
func BenchmarkEncoderNone(b *testing.B) { benchStorm(b, AppendJSONTime) }

func benchStorm(b *testing.B, enc func([]byte, *Event, Omit, time.Time) []byte) {
	ev := encodeCases[2].ev
	ev.ParentToken = parTok
	ev.Parent = encodeCases[3].ev.Parent
	buf := make([]byte, 0, 4096)
	wall := time.Unix(1_767_323_045, 123_456_789)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ev.Ctx.NSPid = int32(i)
		buf = enc(buf[:0], &ev, 0, wall.Add(time.Duration(i)*time.Microsecond))
	}
}
