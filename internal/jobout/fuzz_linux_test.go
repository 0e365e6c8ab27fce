package jobout

import (
	"bytes"
	"encoding/binary"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inotifyRecord is one struct inotify_event as the test lays it out: the
// header, then the name and pad NUL bytes, len counting both.
type inotifyRecord struct {
	wd     int32
	mask   uint32
	cookie uint32
	name   string
	pad    int
}

// encodeInotify appends recs to b as the kernel lays them out in a read of
// an inotify descriptor.
func encodeInotify(b []byte, recs ...inotifyRecord) []byte {
	ne := binary.NativeEndian
	for _, r := range recs {
		b = ne.AppendUint32(b, uint32(r.wd))
		b = ne.AppendUint32(b, r.mask)
		b = ne.AppendUint32(b, r.cookie)
		b = ne.AppendUint32(b, uint32(len(r.name)+r.pad))
		b = append(b, r.name...)
		b = append(b, make([]byte, r.pad)...)
	}
	return b
}

// kernelPad is the padding the kernel gives a name: at least one NUL, up
// to a multiple of the header's size; none for an event without a name.
func kernelPad(name string) int {
	if name == "" {
		return 0
	}
	return (len(name)+unix.SizeofInotifyEvent)/unix.SizeofInotifyEvent*unix.SizeofInotifyEvent - len(name)
}

// refEvent is one whole record as refDecode reads it.
type refEvent struct {
	end  int // offset past the record's last byte
	mask uint32
	name string // up to the first NUL within len
}

// refDecode reads b as a sequence of struct inotify_event, written apart
// from watcher.events: whole records only, from the start; a trailing
// fragment (a partial header, or a name running past the end) is no
// record.
func refDecode(b []byte) []refEvent {
	var out []refEvent
	r := bytes.NewReader(b)
	for {
		var h struct{ Wd, Mask, Cookie, Len uint32 }
		if binary.Read(r, binary.NativeEndian, &h) != nil {
			return out // io.EOF or a partial header
		}
		if uint64(h.Len) > uint64(r.Len()) {
			return out // the name runs past the end
		}
		name := make([]byte, h.Len)
		if _, err := io.ReadFull(r, name); err != nil {
			panic(err) // r held h.Len bytes
		}
		name, _, _ = bytes.Cut(name, []byte{0})
		out = append(out, refEvent{end: len(b) - r.Len(), mask: h.Mask, name: string(name)})
	}
}

// eventsResult is what a read of events did to a fresh watcher.
type eventsResult struct {
	overflow bool
	looked   []string // sorted
	pending  map[string]bool
}

// runEvents hands b, as a read of events, to a fresh watcher of a
// directory that does not exist (Bound finds no file), with a suffix every
// name has; bytes just past b's end, within its capacity, are not NUL, to
// be seen if a name ran past the read.
func runEvents(t *testing.T, dir string, b []byte) eventsResult {
	t.Helper()
	buf := append(append(make([]byte, 0, len(b)+16), b...), "PAST-THE-READ!!!"...)
	in := buf[:len(b)]
	w := watcher{dir: dir, limit: 1 << 60, last: map[string]time.Time{}, pending: map[string]bool{}}
	overflow := w.events(in)
	if !bytes.Equal(in, b) {
		t.Fatalf("events wrote to the buffer it read")
	}
	return eventsResult{overflow, slices.Sorted(maps.Keys(w.last)), w.pending}
}

// wantLooked is the sorted set of names a watcher with an empty suffix
// looks at for recs: every record's name except an overflow record's and
// a name with a '/' (look skips it: no file in the directory has one).
func wantLooked(recs []refEvent) (names []string, overflow bool) {
	set := map[string]bool{}
	for _, r := range recs {
		if r.mask&unix.IN_Q_OVERFLOW != 0 {
			overflow = true
			continue
		}
		if !strings.Contains(r.name, "/") {
			set[r.name] = true
		}
	}
	return slices.Sorted(maps.Keys(set)), overflow
}

// FuzzWatcherEvents feeds arbitrary reads of inotify events to
// watcher.events (the decoding has no seam of its own: it is watched
// through the files it looks at, w.last, and the overflow it reports).
// Whatever the bytes, it decodes exactly the whole records an independent
// decoder finds, from the start of the read: a name is the record's bytes
// up to its first NUL and never a byte past its len nor past the read; a
// trailing partial header or a name running past the end is not decoded;
// an IN_Q_OVERFLOW record is reported and its name not looked at; a name
// among the first eight of the read is looked at once (never left
// pending), and the buffer is not written. Then the input is taken as a
// list of names, one a line, encoded as well-formed records (kernel
// padding, none, a len of 0, overflow records for lines starting with
// '!'): the read decodes back to exactly those names, each record alone
// to its own, and a read cut short within a record (one byte into its
// header, one byte short of it, one byte short of its name) to the
// records before it.
func FuzzWatcherEvents(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "absent")
	f.Fuzz(func(t *testing.T, b []byte) {
		ref := refDecode(b)
		got := runEvents(t, dir, b)
		want, overflow := wantLooked(ref)
		if got.overflow != overflow || !slices.Equal(got.looked, want) {
			t.Fatalf("events(%q) looked at %q, overflow %v; want %q, overflow %v",
				b, got.looked, got.overflow, want, overflow)
		}
		// The first eight names (overflow records aside) are each
		// looked at once however often they come: never pending.
		first := map[string]bool{}
		for _, r := range ref {
			if r.mask&unix.IN_Q_OVERFLOW == 0 && len(first) < 8 {
				first[r.name] = true
			}
		}
		for n := range got.pending {
			if first[n] {
				t.Fatalf("events(%q): %q, among the first eight names, left pending", b, n)
			}
			if !slices.Contains(got.looked, n) {
				t.Fatalf("events(%q): %q pending but never looked at", b, n)
			}
		}

		// Well-formed reads built from the input's lines.
		var recs []inotifyRecord
		seen := map[string]bool{}
		for i, line := range bytes.Split(b, []byte{'\n'}) {
			if len(recs) == 32 {
				break
			}
			r := inotifyRecord{wd: int32(i + 1), mask: unix.IN_MODIFY, cookie: uint32(i)}
			if len(line) > 0 && line[0] == '!' {
				r.wd, r.mask = -1, unix.IN_Q_OVERFLOW
			}
			var name []byte
			for _, c := range line {
				if c != 0 && c != '/' {
					name = append(name, c)
				}
			}
			if seen[string(name)] {
				continue // distinct names: the set looked at says which were decoded
			}
			seen[string(name)] = true
			r.name = string(name)
			if i%2 == 0 {
				r.pad = kernelPad(r.name) // else none: the next header follows the name
			}
			recs = append(recs, r)
		}
		// prefix[i] is what records 0..i-1 decode to.
		type decoded struct {
			names    []string
			overflow bool
		}
		prefix := []decoded{{}}
		var enc []byte
		ends := []int{0}
		for _, r := range recs {
			one := encodeInotify(nil, r)
			enc = append(enc, one...)
			ends = append(ends, len(enc))
			p := prefix[len(prefix)-1]
			p.names = slices.Clone(p.names)
			wantOne := []string{r.name}
			if r.mask&unix.IN_Q_OVERFLOW != 0 {
				wantOne = nil
				p.overflow = true
			} else {
				p.names = append(p.names, r.name)
			}
			prefix = append(prefix, p)
			if res := runEvents(t, dir, one); res.overflow != (wantOne == nil) || !slices.Equal(res.looked, wantOne) {
				t.Fatalf("record %+v decoded alone to %q, overflow %v", r, res.looked, res.overflow)
			}
		}
		for i, p := range prefix {
			slices.Sort(p.names)
			// Whole records 0..i-1, then cut short within record i
			// (its header or its name): records 0..i-1 only.
			cuts := []int{ends[i]}
			if i < len(recs) {
				start, end := ends[i], ends[i+1]
				cuts = append(cuts, start+1, start+unix.SizeofInotifyEvent-1, end-1)
			}
			for _, cut := range cuts {
				if res := runEvents(t, dir, enc[:cut]); res.overflow != p.overflow || !slices.Equal(res.looked, p.names) {
					t.Fatalf("records %+v cut at %d (%d whole) decoded to %q, overflow %v; want %q, overflow %v",
						recs, cut, i, res.looked, res.overflow, p.names, p.overflow)
				}
			}
		}
	})
}
