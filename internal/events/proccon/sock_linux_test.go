package proccon

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// polled lists the descriptors registered in this process's epoll sets (the
// Go runtime has one), from the "tfd:" lines of their fdinfo.
func polled(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var fds []int
	for _, e := range ents {
		link, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || link != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for line := range bytes.Lines(info) {
			f := strings.Fields(string(line))
			if len(f) >= 2 && f[0] == "tfd:" {
				if fd, err := strconv.Atoi(f[1]); err == nil {
					fds = append(fds, fd)
				}
			}
		}
	}
	return fds
}

// has reports whether one of fds refers to the same open socket as fd
// (their /proc/self/fd links name one socket inode).
func has(fds []int, fd int) bool {
	want, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	for _, f := range fds {
		if got, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(f)); err == nil && got == want {
			return true
		}
	}
	return false
}

// The socket is in the runtime's poller only while Read waits for traffic:
// a socket left there wakes the runtime's epoll sleeper for every message,
// even while Read naps (see sock).
func TestIntegrationSocketPolledOnlyWhileWaiting(t *testing.T) {
	s, _ := openSource(t)
	if has(polled(t), s.k.fd) {
		t.Fatalf("socket %d in the runtime's poller after New, want it out", s.k.fd)
	}
	errc := readAll(s)
	// Read waits in the poller once the queue is quiet: a duplicate of
	// the socket (the same socket inode) is registered then.
	testenv.Eventually(t, 10*time.Second, func() bool {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		if s.k.wrc == nil {
			return false
		}
		return has(polled(t), s.k.fd)
	}, "never: Read waiting in the poller")
	// A nap takes it out again (the same call nap makes). The lock is
	// held through the look: Read, woken by any message of the host's,
	// would otherwise register the socket again first.
	s.k.mu.Lock()
	s.k.unwaitLocked()
	fds := polled(t)
	s.k.mu.Unlock()
	if has(fds, s.k.fd) {
		t.Errorf("socket %d still polled after unwait (registered: %v)", s.k.fd, fds)
	}
	s.Close()
	<-errc
}

// busy follows how many datagrams came within one napFor window, however
// many receives took them.
func TestCountWindow(t *testing.T) {
	ms := uint64(time.Millisecond)
	type recv struct {
		at uint64 // ms
		n  int
	}
	tests := []struct {
		name string
		recv []recv
		want bool
	}{
		{"one full batch", []recv{{0, 64}}, true},
		{"each message woke Read", []recv{{0, 1}, {1, 1}, {1, 1}, {2, 4}, {2, 4}, {3, 3}, {4, 2}}, true},
		{"light traffic", []recv{{0, 1}, {2, 1}, {4, 1}}, false},
		{"a storm's short last batch", []recv{{0, 64}, {0, 64}, {1, 3}}, true},
		{"storm over: the window expired", []recv{{0, 64}, {6, 3}}, false},
		{"fifteen, then one more in a new window", []recv{{0, 15}, {6, 1}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var now uint64
			s := &Source{now: func() uint64 { return now }}
			s.winAt = 1000 * ms // a window long past
			for _, r := range tt.recv {
				now = 2000*ms + r.at*ms
				s.count(r.n)
			}
			if s.busy != tt.want {
				t.Errorf("busy after %v = %v, want %v", tt.recv, s.busy, tt.want)
			}
		})
	}
}
