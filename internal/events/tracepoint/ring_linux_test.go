//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/procsupervisor/supervisor/internal/events"
)

// fakeRing lays out a ring buffer as the kernel maps it, in plain memory:
// a consumer page, then the producer page and the data area twice (the
// kernel maps the same pages twice; here every write goes to both copies).
type fakeRing struct {
	cons, prod []byte
	page, size int
	pos        uint64 // producer position
}

func newFakeRing(page, size int, start uint64) *fakeRing {
	f := &fakeRing{cons: make([]byte, page), prod: make([]byte, page+2*size), page: page, size: size, pos: start}
	binary.LittleEndian.PutUint64(f.cons, start)
	binary.LittleEndian.PutUint64(f.prod, start)
	return f
}

// put writes a record with header bits, and publishes it unless busy.
func (f *fakeRing) put(sample []byte, bits uint32) {
	rec := make([]byte, 8+(len(sample)+7)&^7)
	binary.LittleEndian.PutUint32(rec, uint32(len(sample))|bits)
	copy(rec[8:], sample)
	for i, b := range rec {
		off := (f.pos + uint64(i)) & uint64(f.size-1)
		f.prod[f.page+int(off)] = b
		f.prod[f.page+f.size+int(off)] = b
	}
	f.pos += uint64(len(rec))
	binary.LittleEndian.PutUint64(f.prod, f.pos)
}

func (f *fakeRing) consumer() uint64 { return binary.LittleEndian.Uint64(f.cons) }

func TestMmapRing(t *testing.T) {
	sample := func(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }
	tests := []struct {
		name  string
		start uint64 // consumer and producer position at the start
		put   func(f *fakeRing)
		want  [][]byte // samples read before the ring says drained
		err   bool     // the read after want fails with another error
		held  bool     // a record stays in the ring (the consumer stops short)
	}{
		{name: "empty"},
		{
			name: "records in order",
			put:  func(f *fakeRing) { f.put(sample(5, 'a'), 0); f.put(sample(16, 'b'), 0) },
			want: [][]byte{sample(5, 'a'), sample(16, 'b')},
		},
		{
			name: "discarded record skipped",
			put: func(f *fakeRing) {
				f.put(sample(8, 'a'), 0)
				f.put(sample(8, 'w'), ringDiscardBit)
				f.put(sample(3, 'c'), 0)
			},
			want: [][]byte{sample(8, 'a'), sample(3, 'c')},
		},
		{
			name: "busy record stops the read",
			put: func(f *fakeRing) {
				f.put(sample(4, 'a'), 0)
				f.put(sample(4, 'b'), ringBusyBit)
				f.put(sample(4, 'c'), 0)
			},
			want: [][]byte{sample(4, 'a')},
			held: true,
		},
		{
			name:  "record wrapping around the end",
			start: 4096 - 16,
			put:   func(f *fakeRing) { f.put(sample(40, 'w'), 0); f.put(sample(1, 'x'), 0) },
			want:  [][]byte{sample(40, 'w'), sample(1, 'x')},
		},
		{
			name: "length past the producer",
			put: func(f *fakeRing) {
				f.put(sample(8, 'a'), 0)
				f.put(sample(8, 'b'), 0)
				binary.LittleEndian.PutUint32(f.prod[f.page+16:], 1000)
			},
			want: [][]byte{sample(8, 'a')},
			err:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeRing(4096, 4096, tt.start)
			if tt.put != nil {
				tt.put(f)
			}
			r := ringOver(f.cons, f.prod, f.page, f.size)
			var rec ringbuf.Record
			for i, w := range tt.want {
				if err := r.ReadInto(&rec); err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				if !bytes.Equal(rec.RawSample, w) {
					t.Fatalf("read %d: sample %q, want %q", i, rec.RawSample, w)
				}
				// The record's space is given back only at the next read.
				if got, prev := f.consumer(), tt.start; i == 0 && got != prev {
					t.Fatalf("consumer moved to %d while the first record is handed out", got)
				}
			}
			err := r.ReadInto(&rec)
			if tt.err {
				if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("read past the records: %v, want a corrupt-ring error", err)
				}
				return
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read past the records: %v, want os.ErrDeadlineExceeded", err)
			}
			if drained := f.consumer() == f.pos; drained == tt.held {
				t.Fatalf("consumer at %d, producer at %d: want a record held %v", f.consumer(), f.pos, tt.held)
			}
		})
	}
}

func TestMmapRingRemainingAndClose(t *testing.T) {
	f := newFakeRing(4096, 4096, 0)
	f.put([]byte("first"), 0)
	f.put([]byte("second"), 0)
	r := ringOver(f.cons, f.prod, f.page, f.size)
	var rec ringbuf.Record
	if err := r.ReadInto(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.Remaining != 16 {
		t.Fatalf("Remaining %d after the first record, want 16 (the second's header and data)", rec.Remaining)
	}
	if err := r.ReadInto(&rec); err != nil || rec.Remaining != 0 {
		t.Fatalf("second read: %v, Remaining %d", err, rec.Remaining)
	}
	r.Close()
	if err := r.ReadInto(&rec); !errors.Is(err, ringbuf.ErrClosed) {
		t.Fatalf("read after Close: %v, want ringbuf.ErrClosed", err)
	}
}

// FuzzMmapRing feeds arbitrary ring contents and positions: reading never
// panics, hands out only samples inside the data area, and ends.
func FuzzMmapRing(f *testing.F) {
	f.Add(uint64(0), uint64(24), []byte{5, 0, 0, 0, 0, 0, 0, 0, 'h', 'e', 'l', 'l', 'o'})
	f.Add(uint64(4090), uint64(4200), []byte{0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, cons, prod uint64, data []byte) {
		const page, size = 4096, 4096
		fr := newFakeRing(page, size, cons)
		binary.LittleEndian.PutUint64(fr.prod, prod)
		for i := range min(len(data), size) {
			fr.prod[page+i], fr.prod[page+size+i] = data[i], data[i]
		}
		r := ringOver(fr.cons, fr.prod, page, size)
		var rec ringbuf.Record
		for range size {
			if err := r.ReadInto(&rec); err != nil {
				return
			}
			if len(rec.RawSample) > size {
				t.Fatalf("sample of %d bytes from a ring of %d", len(rec.RawSample), size)
			}
		}
		t.Fatalf("no end after %d reads", size)
	})
}

// TestReadCopiesOutOfRing reads exec records through a Source over a small
// ring, each record given back to the producer when the next is read, and
// the producer writing the next ones over its space. Every event's strings
// are what its own record said until the next Read (they live in the
// source's buffer, which the next exec reuses: see events.Event), and a
// Clone taken then keeps them after the ring and the buffer moved on.
func TestReadCopiesOutOfRing(t *testing.T) {
	const page, size, n = 4096, 4096, 40
	f := newFakeRing(page, size, 0)
	s := newSource(testBoot, ringOver(f.cons, f.prod, page, size), lostSequence(0), nil)
	type want struct{ exe, cwd, arg0 string }
	var evs []events.Event
	var wants []want
	check := func(when string, i int, ev *events.Event) {
		t.Helper()
		w := wants[i]
		if ev.Exe != w.exe || ev.Exec.Cwd != w.cwd || len(ev.Argv) != 2 || ev.Argv[0] != w.arg0 {
			t.Errorf("event %d %s: exe %q cwd %q argv %q; want %q, %q, [%q b]", i, when, ev.Exe, ev.Exec.Cwd, ev.Argv, w.exe, w.cwd, w.arg0)
		}
	}
	for i := range n {
		x := execRec{
			record: record{kind: recExec, pid: int32(100 + i), tid: int32(100 + i), ppid: 1, start: uint64(i), comm: "x"},
			argc:   2, argsSize: 10,
			exe: fmt.Sprintf("x%02d\x00bin\x00", i), cwd: fmt.Sprintf("w%02d\x00", i), cgroup: "\x00",
			arg: fmt.Sprintf("a%02d\x00b\x00", i),
		}
		f.put(x.encode(), 0)
		var ev events.Event
		if err := s.Read(&ev); err != nil {
			t.Fatalf("record %d: Read() = %v", i, err)
		}
		wants = append(wants, want{fmt.Sprintf("/bin/x%02d", i), fmt.Sprintf("/w%02d", i), fmt.Sprintf("a%02d", i)})
		check("as read", i, &ev)
		evs = append(evs, ev.Clone())
	}
	if f.pos < 2*size {
		t.Fatalf("the records filled %d bytes: the ring of %d did not wrap twice", f.pos, size)
	}
	for i := range evs {
		check("cloned, after the ring moved on", i, &evs[i])
	}
}
