package daemon

import (
	"errors"
	"testing"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
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
