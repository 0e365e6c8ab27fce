package api

import (
	"net"
	"path/filepath"
	"testing"
)

// BenchmarkGateAccepted measures the accept loop's own work for one
// connection (its accept and what it does before the next accept), with
// the peer alive: the rate at which it drains the listen backlog.
func BenchmarkGateAccepted(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	g := newGate(l, DefaultLimits.withDefaults())
	defer g.Close()
	go func() { // the server's side: close what the gate hands over
		for {
			c, err := g.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	const batch = 256 // under the listen backlog
	clients := make([]net.Conn, 0, batch)
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		n := min(batch, b.N-done)
		for range n {
			c, err := net.Dial("unix", sock)
			if err != nil {
				b.Fatal(err)
			}
			clients = append(clients, c)
		}
		b.StartTimer()
		for range n {
			c, err := l.Accept()
			if err != nil {
				b.Fatal(err)
			}
			g.accepted(c)
		}
		b.StopTimer()
		for _, c := range clients {
			c.Close()
		}
		clients = clients[:0]
		done += n
	}
}

// BenchmarkPeerRead compares the accept loop's read of a peer (start:
// SO_PEERCRED) with the whole read (the pidfd, user namespace and pid
// namespace reads, which the loop made before and the uid's reader makes
// now).
func BenchmarkPeerRead(b *testing.B) {
	sock := filepath.Join(b.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	cc, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	c, err := l.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.Run("start", func(b *testing.B) {
		for b.Loop() {
			r, err := startPeer(c)
			if err != nil {
				b.Fatal(err)
			}
			r.drop()
		}
	})
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			if _, err := peerOf(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
