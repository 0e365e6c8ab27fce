package store

import (
	"fmt"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// benchClaim is a typical grant: a short command line, a token, a holder,
// a verdict.
func benchClaim() Claim {
	c := fullGrant()
	c.Members, c.Release, c.ExitCode = nil, nil, nil
	return c
}

// reportFile reports the file's bytes per unit after n units were written.
func reportFile(b *testing.B, s *Store, n int, unit string) {
	st, err := s.Stats()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.FileBytes)/float64(n), "file-B/"+unit)
	b.ReportMetric(float64(st.DataBytes)/float64(n), "used-B/"+unit)
}

// BenchmarkPut: one fsync'ed transaction per claim, and the file's size
// per claim stored.
func BenchmarkPut(b *testing.B) {
	s, _ := openTemp(b, Options{})
	c := benchClaim()
	v, _ := encodeClaim(&c)
	for b.Loop() {
		c.ID = ""
		if err := s.Put(&c); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(v)), "record-B")
	reportFile(b, s, b.N, "claim")
}

// BenchmarkAddMember: one member per transaction (the cost of recording
// a fork as it is seen) or 64, and the file's growth per member. Members
// go to a new claim every DefaultLimits.MaxMembers.
func BenchmarkAddMember(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s, _ := openTemp(b, Options{})
			c := benchClaim()
			if err := s.Put(&c); err != nil {
				b.Fatal(err)
			}
			st0, _ := s.Stats()
			claims := 1
			ms := make([]Member, batch)
			pid := int32(0)
			n := 0
			for b.Loop() {
				if n+batch > claims*DefaultLimits.MaxMembers {
					c.ID = ""
					if err := s.Put(&c); err != nil {
						b.Fatal(err)
					}
					claims++
				}
				for i := range ms {
					pid++
					ms[i] = Member{Pid: pid, Token: tk("v1:t:0123456789abcdef0123456789abcdef:123456:7890"), Parent: 4242, BornAt: t0}
				}
				if _, err := s.AddMember(c.ID, ms...); err != nil {
					b.Fatal(err)
				}
				n += batch
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/member")
			st, _ := s.Stats()
			b.ReportMetric(float64(st.FileBytes-st0.FileBytes)/float64(n), "file-B/member")
		})
	}
}

// BenchmarkUpdate: a read-modify-write of one claim.
func BenchmarkUpdate(b *testing.B) {
	s, _ := openTemp(b, Options{})
	c := benchClaim()
	if err := s.Put(&c); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := s.Update(c.ID, func(c *Claim) error { c.ExitSignal++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet: reading one claim with 16 members.
func BenchmarkGet(b *testing.B) {
	s, _ := openTemp(b, Options{})
	c := benchClaim()
	for i := range 16 {
		c.Members = append(c.Members, Member{Pid: int32(100 + i), Token: tk("tok"), Parent: 4242})
	}
	if err := s.Put(&c); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(c.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen: the check at open (page walk and decoding every record)
// of a store of 1000 claims with 4 members each.
func BenchmarkOpen(b *testing.B) {
	s, path := openTemp(b, Options{})
	const n = 1000
	for range n / 100 {
		// Bulk load through bbolt's batching would hide nothing here; 10
		// transactions of 100 claims keep the setup short.
		err := s.update("bulk", grow, func(tx *bolt.Tx) error {
			claims, members, _ := buckets(tx)
			for range 100 {
				c := benchClaim()
				c.ID, c.Rev = NewID(Grant), 1
				for j := range 4 {
					c.Members = append(c.Members, Member{Pid: int32(10 + j), Token: tk("tok")})
				}
				v, err := encodeClaim(&c)
				if err != nil {
					return err
				}
				if err := claims.Put([]byte(c.ID), v); err != nil {
					return err
				}
				if err := putMembers(members, c.ID, c.Members); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size()), "file-B")
	for b.Loop() {
		s, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
