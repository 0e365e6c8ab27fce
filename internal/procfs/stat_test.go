package procfs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestParseStat(t *testing.T) {
	tail := " 1 100 100 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 49869 5820416 250 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	tests := []struct {
		name, in string
		want     Stat
	}{
		{"plain", "100 (sleep) S" + tail, Stat{Pid: 100, State: 'S', PPid: 1, PGrp: 100, Session: 100, StartTime: 49869}},
		{"spaces and parens in comm", "42 (a) b (c) Z" + tail, Stat{Pid: 42, State: 'Z', PPid: 1, PGrp: 100, Session: 100, StartTime: 49869}},
		{"empty comm", "7 () R" + tail, Stat{Pid: 7, State: 'R', PPid: 1, PGrp: 100, Session: 100, StartTime: 49869}},
	}
	for _, tt := range tests {
		var got Stat
		if err := ParseStat([]byte(tt.in), &got); err != nil {
			t.Fatalf("%s: ParseStat = %v", tt.name, err)
		}
		got.Comm = [16]byte{}
		if got != tt.want {
			t.Errorf("%s: ParseStat = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	var st Stat
	if err := ParseStat([]byte("42 (a) b (c) Z"+tail), &st); err != nil || st.CommString() != "a) b (c" {
		t.Errorf("comm = %q (%v), want %q", st.CommString(), err, "a) b (c")
	}
}

func TestParseStatMalformed(t *testing.T) {
	for _, in := range []string{
		"",
		"100 sleep S 1",
		"100 (sleep) S 1 100",
		"x (sleep) S" + strings.Repeat(" 1", 30),
		"100 (sleep) SS" + strings.Repeat(" 1", 30),
		"100 (sleep) S 1 1 1" + strings.Repeat(" 1", 15) + " -4",
		"99999999999 (sleep) S" + strings.Repeat(" 1", 30),
	} {
		var st Stat
		if err := ParseStat([]byte(in), &st); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStat(%q) = %v, want ErrMalformed", in, err)
		}
	}
}

func TestReadStatSelf(t *testing.T) {
	r := NewReader("/proc")
	var st Stat
	if err := r.ReadStat(int32(os.Getpid()), &st); err != nil {
		t.Fatalf("ReadStat(self) = %v", err)
	}
	if st.Pid != int32(os.Getpid()) || st.PPid != int32(os.Getppid()) || st.StartTime == 0 {
		t.Errorf("ReadStat(self) = %+v, want pid %d ppid %d and a start time", st, os.Getpid(), os.Getppid())
	}
	if err := r.ReadStat(MaxTestPid, &st); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadStat(absent) = %v, want os.ErrNotExist", err)
	}
	allocs := testing.AllocsPerRun(100, func() { r.ReadStat(int32(os.Getpid()), &st) })
	if allocs != 0 {
		t.Errorf("ReadStat allocates %v times per call, want 0", allocs)
	}
}

// MaxTestPid is above any pid_max, so no process has it.
const MaxTestPid = 1<<22 + 1

func TestBootIDAndTgid(t *testing.T) {
	id, err := ReadBootID("/proc")
	if err != nil || id == (BootID{}) {
		t.Fatalf("ReadBootID = %v, %v", id, err)
	}
	if _, err := ParseBootID("not-an-id"); !errors.Is(err, ErrMalformed) {
		t.Errorf("ParseBootID(garbage) = %v, want ErrMalformed", err)
	}
	tgid, err := Tgid("/proc", int32(os.Getpid()))
	if err != nil || tgid != int32(os.Getpid()) {
		t.Errorf("Tgid(self) = %d, %v", tgid, err)
	}
	if _, err := ParseStatusTgid([]byte("Name: x\nPid: 4\n")); !errors.Is(err, ErrMalformed) {
		t.Errorf("ParseStatusTgid without Tgid = %v, want ErrMalformed", err)
	}
}

func BenchmarkReadStat(b *testing.B) {
	r := NewReader("/proc")
	var st Stat
	pid := int32(os.Getpid())
	b.ReportAllocs()
	for b.Loop() {
		if err := r.ReadStat(pid, &st); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("100 (sleep) S 1 100 100 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 49869 5820416 250"))
	f.Add([]byte("1 ((((() R 0 0 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var st Stat
		err := ParseStat(b, &st)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("ParseStat error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// Accepted: a positive pid, the one before the name; a state; the
		// name as far as 16 bytes hold it, from between the parentheses.
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if st.Pid <= 0 || strings.TrimLeft(string(bytes.TrimSpace(b[:open])), "0") != strconv.Itoa(int(st.Pid)) {
			t.Fatalf("ParseStat(%q): pid %d", b, st.Pid)
		}
		if !('A' <= st.State && st.State <= 'Z' || 'a' <= st.State && st.State <= 'z') {
			t.Fatalf("ParseStat(%q): state %q", b, st.State)
		}
		if name := b[open+1 : end]; !bytes.Equal(st.Comm[:min(len(name), len(st.Comm))], name[:min(len(name), len(st.Comm))]) {
			t.Fatalf("ParseStat(%q): name %q", b, st.Comm)
		}
	})
}

func FuzzParseLines(f *testing.F) {
	f.Add([]byte("Name:\tsleep\nTgid:\t42\nPid:\t42\n"))
	f.Add([]byte("cpu  1 2 3\nbtime 1764432384\nprocesses 9\n"))
	f.Add([]byte("btime -1\nTgid: x"))
	f.Add([]byte("Uid:\t1001\t0\t1001\t0\nNSpid:\t4242\t1\n"))
	f.Add([]byte("Groups:\t4 24 27 1001 \nGid:\t0\t0\t0\t0\n"))
	f.Add([]byte("Groups:\t4 x\n"))
	f.Add([]byte("12 13 0 -4 99999999999 "))
	f.Add([]byte("df08de91-cf9d-49a0-9b8c-ae45c0a06f37\n"))
	f.Add([]byte("Max core file size        0                    unlimited            bytes\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseLimits(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseLimits error %v does not wrap ErrMalformed", err)
		}
		if _, err := ParseStatusUIDs(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseStatusUIDs error %v does not wrap ErrMalformed", err)
		}
		if _, err := ParseStatusGIDs(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseStatusGIDs error %v does not wrap ErrMalformed", err)
		}
		if gs, err := ParseStatusGroups(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseStatusGroups error %v does not wrap ErrMalformed", err)
		} else if v, _ := LineValue(b, "Groups:"); err == nil && len(gs) != len(bytes.Fields(v)) {
			t.Fatalf("ParseStatusGroups = %v from %q: a group left out", gs, v)
		}
		for _, p := range ParseChildren(b, nil) {
			if p <= 0 {
				t.Fatalf("ParseChildren gave pid %d", p)
			}
		}
		if id, err := ParseBootID(string(b)); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseBootID error %v does not wrap ErrMalformed", err)
		} else if err == nil {
			if back, err := ParseBootID(id.String()); err != nil || back != id {
				t.Fatalf("ParseBootID(%q) = %v, but its String %q parses to %v, %v", b, id, id.String(), back, err)
			}
		}
		if ns, err := ParseStatusNSpid(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseStatusNSpid error %v does not wrap ErrMalformed", err)
		} else if err == nil && len(ns) == 0 {
			t.Fatal("ParseStatusNSpid = [], want at least one pid")
		}
		if _, err := ParseStatusTgid(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseStatusTgid error %v does not wrap ErrMalformed", err)
		}
		if v, err := ParseBootTime(b); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("ParseBootTime error %v does not wrap ErrMalformed", err)
		} else if err == nil && v <= 0 {
			t.Fatalf("ParseBootTime = %d, want a positive time", v)
		}
	})
}

func TestParseStatusIDs(t *testing.T) {
	b := []byte("Name:\tsu\nUid:\t1001\t0\t0\t0\nGid:\t5\t5\t5\t5\nNSpid:\t4242\t7\t1\n")
	ids, err := ParseStatusUIDs(b)
	if err != nil || ids != (IDs{Real: 1001, Effective: 0, Saved: 0}) {
		t.Errorf("ParseStatusUIDs = %+v, %v, want {1001 0 0}", ids, err)
	}
	if ids.All(1001) || ids.All(0) {
		t.Errorf("IDs %+v: All(1001) %v, All(0) %v; want neither", ids, ids.All(1001), ids.All(0))
	}
	if gids, err := ParseStatusGIDs(b); err != nil || !gids.All(5) {
		t.Errorf("ParseStatusGIDs = %+v, %v, want all 5", gids, err)
	}
	ns, err := ParseStatusNSpid(b)
	if err != nil || len(ns) != 3 || ns[0] != 4242 || ns[2] != 1 {
		t.Errorf("ParseStatusNSpid = %v, %v, want [4242 7 1]", ns, err)
	}
	for _, bad := range []string{"Uid:\t1\t2\n", "Uid:\tx\t0\t0\t0\n", "NSpid:\t0\n", "NSpid:\n"} {
		if _, err := ParseStatusUIDs([]byte(bad)); err == nil && bad[0] == 'U' {
			t.Errorf("ParseStatusUIDs(%q) accepted", bad)
		}
		if _, err := ParseStatusNSpid([]byte(bad)); err == nil {
			t.Errorf("ParseStatusNSpid(%q) accepted", bad)
		}
	}
	self, err := ReadUIDs("/proc", int32(os.Getpid()))
	if err != nil || self.Real != uint32(os.Getuid()) {
		t.Errorf("ReadUIDs(self) = %+v, %v, want real uid %d", self, err, os.Getuid())
	}
}

func TestReadLimits(t *testing.T) {
	l, err := ReadLimits("/proc", int32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	var want syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		t.Fatal(err)
	}
	if got := l[syscall.RLIMIT_NOFILE]; got[0] != want.Cur || got[1] != want.Max {
		t.Errorf("ReadLimits nofile = %v, want %d %d", got, want.Cur, want.Max)
	}
	if _, err := ParseLimits([]byte("Max cpu time unlimited unlimited seconds\n")); !errors.Is(err, ErrMalformed) {
		t.Errorf("ParseLimits of one line = %v, want ErrMalformed", err)
	}
}

func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	kids, err := Children("/proc", int32(os.Getpid()))
	if err != nil || !slices.Contains(kids, int32(cmd.Process.Pid)) {
		t.Errorf("Children(self) = %v, %v, want it to hold %d", kids, err, cmd.Process.Pid)
	}
}

func TestParseStatusGroups(t *testing.T) {
	tests := []struct {
		in   string
		want []uint32
		ok   bool
	}{
		{"Uid:\t0\t0\t0\t0\nGroups:\t4 24 27 1001 \nNSpid:\t1\n", []uint32{4, 24, 27, 1001}, true},
		{"Groups:\t\n", []uint32{}, true},
		{"Groups:", []uint32{}, true},
		{"Groups:\t4 x 27\n", nil, false},
		{"Groups:\t4 -1\n", nil, false},
		{"Groups:\t4294967296\n", nil, false},
		{"Uid:\t0\t0\t0\t0\n", nil, false},
	}
	for _, tt := range tests {
		got, err := ParseStatusGroups([]byte(tt.in))
		if (err == nil) != tt.ok || tt.ok && !slices.Equal(got, tt.want) {
			t.Errorf("ParseStatusGroups(%q) = %v, %v, want %v (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseStatusGroups(%q) error %v does not wrap ErrMalformed", tt.in, err)
		}
	}
}

func TestParseChildren(t *testing.T) {
	got := ParseChildren([]byte("12 13 0 -4 x 99999999999 14 \n"), []int32{7})
	if want := []int32{7, 12, 13, 14}; !slices.Equal(got, want) {
		t.Errorf("ParseChildren = %v, want %v", got, want)
	}
}
