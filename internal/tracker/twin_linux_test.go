package tracker

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/lineage"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// TestIntegrationSameTickTwinDropped: a pid given again within the clock
// tick its first holder started in, against the real kernel. A claim on
// the first by a token without its pidfs inode is never judged OWNED for
// the second, before the graph drops the first's record and after. It was
// after: the graph then held one candidate, watched without a gap since
// its birth (a review's root admit and release of the first's ticks-only
// token killed the stranger).
func TestIntegrationSameTickTwinDropped(t *testing.T) {
	for _, mech := range kernelMechanisms {
		t.Run(mech, func(t *testing.T) {
			testenv.RequireRoot(t)
			boot, err := procfs.ReadBootID("/proc")
			if err != nil {
				t.Fatal(err)
			}
			const age = 200 * time.Millisecond
			tr, err := Start(context.Background(), Options{Mechanism: mech, Boot: boot, Graph: lineage.Config{MaxExitedAge: age}})
			if err != nil {
				testenv.Skip(t, "mechanism %s: %v", mech, err)
			}
			t.Cleanup(func() { tr.Close() })
			j := &verdict.Judge{Boot: boot, Observer: tr}
			for attempt := 0; attempt < 200; attempt++ {
				ticks, ino, second, err := testenv.SameTick(t, testenv.FreePid(t))
				if err != nil {
					continue
				}
				if ino == 0 {
					testenv.Skip(t, "kernel has no pidfs inode ids")
				}
				h, err := pidfd.Open(second.Pid, boot)
				if err != nil {
					second.Stop()
					continue
				}
				now := h.Token()
				h.Close()
				if now.Start != ticks {
					second.Stop()
					continue
				}
				coarse := token.Token{Boot: boot, Start: ticks, Prec: token.Ticks}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err = tr.Sync(ctx)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if v := j.Judge(second.Pid, coarse); v.Result == verdict.Owned {
					t.Fatalf("a ticks-only claim on the first holder, both held: %+v, a stranger OWNED", v)
				}
				time.Sleep(2 * age)
				tr.Graph().Expire()
				if _, held := tr.Graph().Watch(second.Pid, token.Token{Boot: boot, Start: ticks, Ino: ino, Prec: token.Ticks}); held {
					t.Fatal("the first holder's record is still held")
				}
				if v := j.Judge(second.Pid, coarse); v.Result != verdict.Unverifiable {
					t.Errorf("a ticks-only claim on the first holder, its record dropped: %+v, want UNVERIFIABLE", v)
				}
				second.Stop()
				return
			}
			t.Fatal("no same-tick reissue in 200 attempts")
		})
	}
}

// TestBornOf: a process the /proc walk finds whose birth parent, as the
// graph saw its fork, is a member is one (a child forked between the
// graph's look and the walk was listed unproven, "born of a process which
// is not one", of its own member parent); a parent named by pid alone, or
// by another instance's token, is not.
func TestBornOf(t *testing.T) {
	testenv.RequireRoot(t)
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self, err := pidfd.Open(int32(os.Getpid()), boot)
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	other := self.Token()
	other.Ino++
	for _, tt := range []struct {
		name string
		n    lineage.Node
		want bool
	}{
		{"born of a member", lineage.Node{PPid: self.Pid(), ParentToken: self.Token()}, true},
		{"parent token unknown", lineage.Node{PPid: self.Pid()}, false},
		{"born of another instance at the pid", lineage.Node{PPid: self.Pid(), ParentToken: other}, false},
		{"born of another pid", lineage.Node{PPid: self.Pid() + 1, ParentToken: self.Token()}, false},
	} {
		if got := bornOf([]*pidfd.Handle{self}, &tt.n); got != tt.want {
			t.Errorf("%s: bornOf = %v, want %v", tt.name, got, tt.want)
		}
	}
}
