package execcache

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/procsupervisor/supervisor/internal/events"
)

// inBuffer returns ev with its strings moved into buf, as the eBPF source
// decodes an exec into the one buffer it reuses.
func inBuffer(buf []byte, ev events.Event) events.Event {
	buf = buf[:0]
	put := func(s string) string {
		if s == "" {
			return ""
		}
		n := len(buf)
		buf = append(buf, s...)
		return unsafe.String(&buf[n], len(s))
	}
	ev.Exe = put(ev.Exe)
	ev.Exec.Cwd, ev.Exec.Cgroup, ev.Exec.ContainerID = put(ev.Exec.Cwd), put(ev.Exec.Cgroup), put(ev.Exec.ContainerID)
	argv := make([]string, len(ev.Argv))
	for i, a := range ev.Argv {
		argv[i] = put(a)
	}
	ev.Argv = argv
	return ev
}

// TestEntryOutlivesTheSourceBuffer: an exec decoded into a buffer its source
// reuses is described, to its child's events, as it was, after the buffer
// has been overwritten by the next exec and scrambled.
func TestEntryOutlivesTheSourceBuffer(t *testing.T) {
	c := New(Config{})
	buf := make([]byte, 0, 4096)
	orig := execEv(100, tok(1, 1), 1, tok(0, 9), "make", "-j4", "all")
	orig.Exec.Cgroup, orig.Exec.ContainerID = "/system.slice/docker-abc.scope", "abc"
	p := inBuffer(buf, orig)
	c.Observe(&p)
	other := inBuffer(buf, execEv(200, tok(3, 3), 1, tok(0, 9), "other-program", "--with", "other", "arguments"))
	c.Observe(&other)
	b := buf[:cap(buf)]
	for i := range b {
		b[i] = '#'
	}
	f := forkEv(101, tok(2, 2), 100, tok(1, 1), 1000)
	c.Observe(&f)
	d := f.Parent
	if d == nil {
		t.Fatal("the child has no parent description")
	}
	if d.Exe != orig.Exe || strings.Join(d.Argv, " ") != "make -j4 all" || d.Exec.Cwd != orig.Exec.Cwd ||
		d.Exec.Cgroup != orig.Exec.Cgroup || d.Exec.ContainerID != "abc" {
		t.Errorf("parent after the source's buffer moved on: exe %q argv %q cwd %q cgroup %q container %q; want %q %q %q %q abc",
			d.Exe, d.Argv, d.Exec.Cwd, d.Exec.Cgroup, d.Exec.ContainerID, orig.Exe, orig.Argv, orig.Exec.Cwd, orig.Exec.Cgroup)
	}
}

// TestStormAllocs: in a storm's steady state (a child forked, exec'd, exited
// and forgotten, over and over) the cache copies each exec into a slot it
// already has: nothing is allocated per event.
func TestStormAllocs(t *testing.T) {
	c := New(Config{})
	parent := execEv(1, tok(1, 1), 0, tok(0, 0), "runner")
	c.Observe(&parent)
	long := strings.Repeat("x", 127)
	// The events are made once: what is measured is the cache.
	tmpl := inBuffer(make([]byte, 0, 8192), execEv(5000, tok(0, 0), 1, tok(1, 1), "target", long, long, long))
	i := 0
	step := func() {
		i++
		child := tok(uint64(i)+10, uint64(i)+10)
		f := forkEv(5000, child, 1, tok(1, 1), 0)
		c.Observe(&f)
		x := tmpl
		x.Token = child
		c.Observe(&x)
		e := exitEv(5000, child, 1, tok(1, 1))
		c.Observe(&e)
		c.Forget(5000, child)
	}
	step()
	if a := testing.AllocsPerRun(200, step); a != 0 {
		t.Errorf("a storm's fork, exec, exit and forget allocate %v times, want 0", a)
	}
	if st := c.Stats(); st.Entries != 1 || st.Forgotten == 0 {
		t.Errorf("stats %+v, want the parent alone left and the children forgotten", st)
	}
}

// TestKeptBuffersBounded: free slots keep their buffers for the next entry,
// but not one larger than keepSlotBytes, nor more than keepBytes in all;
// a slot holding a small entry in a larger buffer is charged the buffer.
func TestKeptBuffersBounded(t *testing.T) {
	c := New(Config{})
	big := strings.Repeat("b", keepSlotBytes)
	mid := strings.Repeat("m", keepSlotBytes/2)
	for i := range 200 {
		arg := mid
		if i%2 == 0 {
			arg = big
		}
		x := execEv(int32(1000+i), tok(uint64(i)+1, uint64(i)+1), 1, tok(0, 9), "p", arg)
		c.Observe(&x)
	}
	for i := range 200 {
		e := exitEv(int32(1000+i), tok(uint64(i)+1, uint64(i)+1), 1, tok(0, 9))
		c.Observe(&e)
		c.Forget(int32(1000+i), tok(uint64(i)+1, uint64(i)+1))
	}
	var kept int64
	for _, i := range c.free {
		s := &c.slots[i]
		if h := s.held(); h > keepSlotBytes {
			t.Errorf("free slot %d keeps %d bytes, over %d", i, h, keepSlotBytes)
		}
		kept += c.slots[i].held()
	}
	if kept != c.kept || kept > keepBytes || kept == 0 {
		t.Errorf("free slots keep %d bytes (counted %d), want some, at most %d", kept, c.kept, keepBytes)
	}
	// A small entry in a slot that kept a larger buffer is charged it.
	x := execEv(7, tok(99, 99), 1, tok(0, 9), "small")
	c.Observe(&x)
	i, _ := c.slotOf(7)
	if s := &c.slots[i]; s.cost < s.held() || c.Stats().Bytes != s.cost {
		t.Errorf("entry charged %d (stats %d) for buffers of %d", s.cost, c.Stats().Bytes, s.held())
	}
	checkBounds(t, c)
}
