package daemon

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
)

// addCounter is a claimStore whose AddMember records how many members it
// was given.
type addCounter struct {
	claimStore
	got int
}

func (a *addCounter) AddMember(id string, ms ...store.Member) (int, error) {
	a.got += len(ms)
	return len(ms), nil
}

// TestMemberQuotaRecordsWhatFits: a batch of members past the owner's byte
// quota records the members that fit and refuses the rest, so that what
// is left of the quota does not depend on how the events were batched;
// root's claims are not counted.
func TestMemberQuotaRecordsWhatFits(t *testing.T) {
	tests := []struct {
		name      string
		uid       uint32
		batch     int
		wantAdded int
		wantQuota bool
	}{
		{"fits whole", 1000, 2, 2, false},
		{"cut at the quota", 1000, 9, 5, true},
		{"root's claim", 0, 9, 9, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newClaimIndex()
			c := store.Claim{ID: "g-a", UID: tt.uid, Kind: store.Grant, State: store.Running}
			x.set(&c)
			used := claimBytes(&c)
			quota := used + 5*memberBytes + memberBytes/2 // room for 5 members
			inner := &addCounter{}
			s := memberQuota{claimStore: inner, x: x, quota: quota}
			added, err := s.AddMember(c.ID, make([]store.Member, tt.batch)...)
			if added != tt.wantAdded || inner.got != tt.wantAdded || errors.Is(err, api.ErrQuota) != tt.wantQuota {
				t.Fatalf("AddMember of %d = %d (store got %d), %v; want %d, over quota %v", tt.batch, added, inner.got, err, tt.wantAdded, tt.wantQuota)
			}
		})
	}
}

// TestMemberIndexFollowsStore: the index of members by pid names the open
// claims that record a member at a pid, of the uid asked (or all): after
// members are added, after one instance of a reused pid is forgotten while
// another stays, after the claim closes, after it is deleted, and as loaded
// from the store.
func TestMemberIndexFollowsStore(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	x := newClaimIndex()
	s := memberQuota{claimStore: st, x: x}
	tok := func(n uint64) token.Token { return token.Token{Start: n, Prec: token.Ticks} }
	a := store.Claim{ID: "g-aaaaaaaaaaaa", UID: 1000, Kind: store.Grant, State: store.Running, Pid: 5, Token: tok(5)}
	b := store.Claim{ID: "g-bbbbbbbbbbbb", UID: 1001, Kind: store.Grant, State: store.Running, Pid: 6, Token: tok(6)}
	for _, c := range []*store.Claim{&a, &b} {
		if err := st.Put(c); err != nil {
			t.Fatal(err)
		}
		x.set(c)
	}
	add := func(id string, pid int32, start uint64) {
		t.Helper()
		if _, err := s.AddMember(id, store.Member{Pid: pid, Token: tok(start)}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, pid int32, uid uint32, all bool, want ...string) {
		t.Helper()
		got := x.memberClaims(pid, uid, all)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: memberClaims(%d, uid %d, all %v) = %v, want %v", when, pid, uid, all, got, want)
		}
	}
	add(a.ID, 10, 100)
	add(a.ID, 11, 110)
	add(b.ID, 10, 101)
	check("added", 10, 1000, false, a.ID)
	check("added", 10, 0, true, a.ID, b.ID)
	check("added", 11, 1001, false)
	check("added", 12, 0, true)
	// pid 10 reissued within a's tree: two instances; one forgotten.
	add(a.ID, 10, 102)
	if n, err := s.RemoveMember(a.ID, store.Instance{Pid: 10, Token: tok(100)}); n != 1 || err != nil {
		t.Fatalf("RemoveMember = %d, %v", n, err)
	}
	check("one instance of two forgotten", 10, 1000, false, a.ID)
	if n, err := s.RemoveMember(a.ID, store.Instance{Pid: 10, Token: tok(102)}); n != 1 || err != nil {
		t.Fatalf("RemoveMember = %d, %v", n, err)
	}
	check("both forgotten", 10, 1000, false)
	// Loaded again from the store, as at start.
	y := newClaimIndex()
	for _, id := range []string{a.ID, b.ID} {
		c, err := st.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		y.set(&c)
	}
	if got := y.memberClaims(11, 1000, false); !slices.Equal(got, []string{a.ID}) {
		t.Errorf("loaded: memberClaims(11) = %v, want [%s]", got, a.ID)
	}
	// Closed, as an update sets it: the claim read back from the store.
	closed, err := st.Get(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	closed.State = store.Released
	x.set(&closed)
	check("a released", 11, 1000, false)
	x.del(b.ID)
	check("b deleted", 10, 0, true)
	if len(x.byMember) != 1 { // a's pid 11, kept while a is stored
		t.Errorf("byMember holds %d pids, want 1: %v", len(x.byMember), x.byMember)
	}
}
