package fallback

import (
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

const testBtime = 1_800_000_000 // boot time, Unix seconds

func tick(start uint64) token.Token {
	return token.Token{Boot: testBoot, Start: start, Prec: token.Ticks}
}
func sec(start uint64) token.Token {
	return token.Token{Boot: testBoot, Start: start, Prec: token.Second}
}
func micro(start uint64) token.Token {
	return token.Token{Boot: testBoot, Start: start, Prec: token.Micro}
}

func TestCompareAcross(t *testing.T) {
	other := procfs.BootID{9}
	tests := []struct {
		name       string
		claim, obs token.Token
		btime      int64
		want       token.Match
	}{
		{"same ticks without inode", tick(500), tick(500), testBtime, token.Unproven},
		{"different ticks", tick(500), tick(501), testBtime, token.Different},
		{"same micro", micro(5), micro(5), 0, token.Same},
		{"other boot, other precision", token.Token{Boot: other, Start: 1, Prec: token.Ticks}, sec(1), testBtime, token.OtherBoot},
		{"ticks within a second of ps", tick(12_345), sec(testBtime + 123), testBtime, token.Unproven},
		{"ticks 2s from ps", tick(12_345), sec(testBtime + 125), testBtime, token.Unproven},
		{"ticks over 2s from ps", tick(12_345), sec(testBtime + 126), testBtime, token.Different},
		{"ps before ticks by over 2s", tick(12_345), sec(testBtime + 120), testBtime, token.Different},
		{"ticks without boot time", tick(12_345), sec(testBtime + 500), 0, token.Unproven},
		{"micro against ps, same second", micro((testBtime+7)*1e6 + 999_999), sec(testBtime + 7), 0, token.Unproven},
		{"micro against ps, 3 s apart", micro((testBtime + 7) * 1e6), sec(testBtime + 10), 0, token.Different},
		{"zero observed", sec(1), token.Token{}, 0, token.Unproven},
	}
	for _, tt := range tests {
		if got, why := CompareAcross(tt.claim, tt.obs, tt.btime); got != tt.want {
			t.Errorf("%s: CompareAcross(%v, %v, %d) = %v (%s), want %v", tt.name, tt.claim, tt.obs, tt.btime, got, why, tt.want)
		}
	}
}

// table builds a plausible snapshot: pid 1, the supervisor (100) and rows.
func table(seq uint64, taken time.Time, prec token.Precision, rows ...Entry) *Snapshot {
	s := &Snapshot{Seq: seq, Taken: taken, Boot: testBoot, BootTime: testBtime, Self: 100}
	s.Entries = append(s.Entries,
		Entry{Pid: 1, Token: token.Token{Boot: testBoot, Start: 1, Prec: prec}, State: 'S'},
		Entry{Pid: 100, PPid: 1, Token: token.Token{Boot: testBoot, Start: 2, Prec: prec}, State: 'S'})
	s.Entries = append(s.Entries, rows...)
	if err := s.finish(); err != nil {
		panic(err)
	}
	return s
}

func TestJudge(t *testing.T) {
	t0 := time.Unix(testBtime+1000, 0)
	startSec := uint64(testBtime + 900) // a process started 100 s before t0
	startTick := uint64(900 * userHZ)
	psTable := func(seq uint64, taken time.Time, tok token.Token) *Snapshot {
		return table(seq, taken, token.Second, Entry{Pid: 4242, PPid: 100, Token: tok, State: 'S'})
	}
	// cont has seen 4242 with sec(startSec) in two snapshots since t0.
	cont := NewContinuity(t0.Add(-time.Minute), 10*time.Second)
	cont.Observe(psTable(1, t0.Add(-time.Second), sec(startSec)))
	cont.Observe(psTable(2, t0.Add(time.Second), sec(startSec)))
	cur := psTable(3, t0.Add(2*time.Second), sec(startSec))
	cont.Observe(cur)

	implausible := &Snapshot{Boot: testBoot, Self: 100, Entries: []Entry{{Pid: 100, Token: sec(1)}}}
	partial := table(9, t0, token.Second, Entry{Pid: 4242, PPid: 100})
	procTable := table(9, t0, token.Ticks, Entry{Pid: 4242, PPid: 100, Token: tick(startTick), State: 'S'})
	sysctlTable := table(9, t0, token.Micro, Entry{Pid: 4242, PPid: 100, Token: micro(startSec * 1e6), State: 'S'})
	otherBoot := token.Token{Boot: procfs.BootID{7}, Start: startSec, Prec: token.Second}

	tests := []struct {
		name  string
		claim Claim
		snap  *Snapshot
		cont  *Continuity
		want  verdict.Result
	}{
		{"no snapshot", Claim{4242, sec(startSec), t0}, nil, nil, verdict.Unverifiable},
		{"implausible snapshot", Claim{4242, sec(startSec), t0}, implausible, nil, verdict.Unverifiable},
		{"zero claim", Claim{4242, token.Token{}, t0}, cur, cont, verdict.Unverifiable},
		{"pid absent", Claim{4343, sec(startSec), t0}, cur, cont, verdict.Gone},
		{"partial row", Claim{4242, sec(startSec), t0}, partial, nil, verdict.Unverifiable},
		{"different second", Claim{4242, sec(startSec - 1), t0}, cur, cont, verdict.Foreign},
		{"other boot", Claim{4242, otherBoot, t0}, cur, cont, verdict.Foreign},
		{"second token, continuous since claim", Claim{4242, sec(startSec), t0}, cur, cont, verdict.Owned},
		{"second token, no continuity", Claim{4242, sec(startSec), t0}, cur, nil, verdict.Unverifiable},
		{"second token, continuity of another snapshot", Claim{4242, sec(startSec), t0}, psTable(3, t0.Add(2*time.Second), sec(startSec)), cont, verdict.Unverifiable},
		{"second token, claim older than the tracker", Claim{4242, sec(startSec), t0.Add(-2 * time.Minute)}, cur, cont, verdict.Unverifiable},
		{"second token, claim inside its start second", Claim{4242, sec(startSec), time.Unix(int64(startSec), 500e6)}, cur, cont, verdict.Unverifiable},
		{"second token, claim 1.5 s after start", Claim{4242, sec(startSec), time.Unix(int64(startSec)+1, 500e6)}, cur, cont, verdict.Unverifiable},
		{"ticks claim against ps, same second", Claim{4242, tick(startTick + 50), t0}, cur, cont, verdict.Unverifiable},
		{"ticks claim against ps, 5 s off", Claim{4242, tick(startTick + 500), t0}, cur, cont, verdict.Foreign},
		{"ticks claim with inode against proc", Claim{4242, token.Token{Boot: testBoot, Start: startTick, Ino: 77, Prec: token.Ticks}, t0}, procTable, nil, verdict.Unverifiable},
		{"ticks claim, different tick", Claim{4242, tick(startTick + 1), t0}, procTable, nil, verdict.Foreign},
		{"micro claim", Claim{4242, micro(startSec * 1e6), t0}, sysctlTable, nil, verdict.Owned},
		{"micro claim, one microsecond off", Claim{4242, micro(startSec*1e6 + 1), t0}, sysctlTable, nil, verdict.Foreign},
	}
	for _, tt := range tests {
		got, why := Judge(tt.claim, tt.snap, tt.cont)
		if got != tt.want {
			t.Errorf("%s: Judge(%+v) = %v (%s), want %v", tt.name, tt.claim, got, why, tt.want)
		}
		if why == "" {
			t.Errorf("%s: Judge gave no reason", tt.name)
		}
	}

	// After a failed poll nothing is continuous, not even with a later
	// good snapshot.
	cont.Fail(t0.Add(3 * time.Second))
	after := psTable(4, t0.Add(4*time.Second), sec(startSec))
	cont.Observe(after)
	if got, why := Judge(Claim{4242, sec(startSec), t0}, after, cont); got != verdict.Unverifiable {
		t.Errorf("Judge across a failed poll = %v (%s), want UNVERIFIABLE", got, why)
	}
	// A claim made after the failure is continuous again.
	if got, why := Judge(Claim{4242, sec(startSec), t0.Add(3500 * time.Millisecond)}, after, cont); got != verdict.Owned {
		t.Errorf("Judge of a claim made after the failure = %v (%s), want OWNED", got, why)
	}
}

func TestContinuity(t *testing.T) {
	t0 := time.Unix(testBtime+1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	row := func(pid int32, start uint64) Entry { return Entry{Pid: pid, PPid: 100, Token: sec(start), State: 'S'} }
	c := NewContinuity(at(0), 5*time.Second)
	c.Observe(table(1, at(1), token.Second, row(10, 1)))
	c.Observe(table(2, at(2), token.Second, row(10, 1), row(11, 2)))
	c.Observe(table(3, at(3), token.Second, row(10, 1), row(11, 3)))     // 11 reissued
	c.Observe(table(4, at(4), token.Second, row(10, 1), Entry{Pid: 11})) // 11 unreadable
	tests := []struct {
		name  string
		pid   int32
		tok   token.Token
		since time.Time
		want  bool
	}{
		{"seen since before the first snapshot", 10, sec(1), at(0).Add(time.Millisecond), true},
		{"claim before the tracker started", 10, sec(1), at(-1), false},
		{"claim after the last snapshot", 10, sec(1), at(5), false},
		{"wrong token", 10, sec(2), at(1), false},
		{"partial row ends the run", 11, sec(3), at(3), false},
		{"no such pid", 12, sec(1), at(1), false},
	}
	for _, tt := range tests {
		if got := c.Seen(tt.pid, tt.tok, tt.since); got != tt.want {
			t.Errorf("%s: Seen(%d, %v, %v) = %v, want %v", tt.name, tt.pid, tt.tok, tt.since, got, tt.want)
		}
	}
	// A late poll (more than maxGap after the previous) breaks every run.
	c.Observe(table(5, at(20), token.Second, row(10, 1)))
	if c.Seen(10, sec(1), at(1)) {
		t.Error("Seen across a missed poll = true, want false")
	}
	if got := c.Gaps(); got != 1 {
		t.Errorf("Gaps() = %d, want 1", got)
	}
	if !c.Seen(10, sec(1), at(19)) {
		t.Error("Seen since the last good poll before the late one = false, want true")
	}
}

func TestMember(t *testing.T) {
	t0 := time.Unix(testBtime+1000, 0)
	root := Entry{Pid: 200, PPid: 100, Token: sec(10), State: 'S'}
	kid := Entry{Pid: 201, PPid: 200, Token: sec(11), State: 'S'}
	grandkid := Entry{Pid: 202, PPid: 201, Token: sec(12), State: 'S'}
	orphan := Entry{Pid: 202, PPid: 1, Token: sec(12), State: 'S'} // reparented to init
	kid2 := Entry{Pid: 201, PPid: 200, Token: sec(13), State: 'S'} // 201 reissued
	rootI := Instance{root.Pid, root.Token}
	gk := Instance{grandkid.Pid, grandkid.Token}

	tests := []struct {
		name  string
		snaps [][]Entry
		fail  bool // a failed poll before the last snapshot
		inst  Instance
		want  Membership
	}{
		{"chain in two consecutive snapshots", [][]Entry{{root, kid, grandkid}, {root, kid, grandkid}}, false, gk, Member},
		{"chain in one snapshot only", [][]Entry{{root, kid, grandkid}}, false, gk, Unverified},
		{"born between two looks", [][]Entry{{root, kid}, {root, kid, grandkid}}, false, gk, Unverified},
		{"failed poll between", [][]Entry{{root, kid, grandkid}, {root, kid, grandkid}}, true, gk, Unverified},
		{"reparented to init", [][]Entry{{root, kid, grandkid}, {root, orphan}}, false, gk, Unverified},
		{"orphan in both", [][]Entry{{root, orphan}, {root, orphan}}, false, gk, Unverified},
		{"intermediate reissued", [][]Entry{{root, kid, grandkid}, {root, kid2, grandkid}}, false, gk, Unverified},
		{"root is the instance", [][]Entry{{root}, {root}}, false, rootI, Member},
		{"absent from the latest snapshot", [][]Entry{{root, kid, grandkid}, {root, kid}}, false, gk, Absent},
		{"root pid held by another", [][]Entry{{{Pid: 200, PPid: 100, Token: sec(9)}, kid, grandkid}, {{Pid: 200, PPid: 100, Token: sec(9)}, kid, grandkid}}, false, gk, Unverified},
	}
	for _, tt := range tests {
		c := NewContinuity(t0, time.Minute)
		for i, rows := range tt.snaps {
			if tt.fail && i == len(tt.snaps)-1 {
				c.Fail(t0.Add(time.Duration(i) * time.Second))
			}
			c.Observe(table(uint64(i+1), t0.Add(time.Duration(i+1)*time.Second), token.Second, rows...))
		}
		if got, why := c.Member(tt.inst, rootI); got != tt.want {
			t.Errorf("%s: Member(%v) = %v (%s), want %v", tt.name, tt.inst, got, why, tt.want)
		}
	}
	if got, _ := NewContinuity(t0, 0).Member(gk, rootI); got != Unverified {
		t.Errorf("Member with no snapshot = %v, want unverified", got)
	}
}

func TestPathsEqual(t *testing.T) {
	tests := []struct {
		a, b       string
		fold, want bool
	}{
		{"/Users/jürgen/Work", "/Users/jürgen/Work/", false, true},
		{"/Users/jürgen/Work", "/users/JÜRGEN/work", true, true},
		{"/Users/jürgen/Work", "/users/JÜRGEN/work", false, false},
		{"/Applications/Foo.app/../Bar.app", "/applications/bar.APP", true, true},
		{"/a/b", "/a/c", true, false},
		{"/tmp//x/./y", "/tmp/x/y", false, true},
	}
	for _, tt := range tests {
		if got := pathsEqual(tt.a, tt.b, tt.fold); got != tt.want {
			t.Errorf("pathsEqual(%q, %q, %v) = %v, want %v", tt.a, tt.b, tt.fold, got, tt.want)
		}
	}
	if SamePath("/A", "/a") != FoldPathCase {
		t.Errorf("SamePath(/A, /a) = %v, want FoldPathCase (%v)", !FoldPathCase, FoldPathCase)
	}
}

func TestParseBootTime(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"cpu  1 2 3\nintr 5\nbtime 1780070742\nprocesses 9\n", 1780070742, true},
		{"cpu 1\n", 0, false},
		{"btime x\n", 0, false},
	}
	for _, tt := range tests {
		got, err := procfs.ParseBootTime([]byte(tt.in))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("procfs.ParseBootTime(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestDarwinBoot(t *testing.T) {
	a, b := darwinBoot(1780070742, 123456), darwinBoot(1780070742, 123457)
	if a == b {
		t.Errorf("darwinBoot: boots a microsecond apart have the same identity %v", a)
	}
	if a != darwinBoot(1780070742, 123456) {
		t.Error("darwinBoot is not deterministic")
	}
	if got := a.String(); got != "000000006a19b956"+"0001e240"+"6d616300" {
		t.Errorf("darwinBoot(...) = %s", got)
	}
}
