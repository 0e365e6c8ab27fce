package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestSocketPidfdShort: the peer's pidfd, which the kernel gives through
// the socket, cannot be had with the daemon out of descriptors, and that
// is said as a want (short), not as a peer gone or in another namespace.
func TestSocketPidfdShort(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "server end")
	defer f.Close()
	defer unix.Close(fds[1])
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var pidfd int
	var short bool
	testenv.WithoutFDs(t, func() { pidfd, short = socketPidfd(c, int32(os.Getpid())) })
	if pidfd >= 0 {
		unix.Close(pidfd)
	}
	if pidfd >= 0 || !short {
		t.Errorf("socketPidfd with no descriptor left = %d, short %v; want -1, short", pidfd, short)
	}
	pidfd, short = socketPidfd(c, int32(os.Getpid()))
	if pidfd < 0 || short {
		t.Errorf("socketPidfd = %d, short %v; want a pidfd", pidfd, short)
	}
	if pidfd >= 0 {
		unix.Close(pidfd)
	}
}

// TestAdmitPeerShort: a peer whose namespace the daemon could not confirm
// for a want of descriptors is told to retry (503, Retry-After), not
// refused as a caller from another pid namespace (403, which the client
// takes as final): a review's user was told to stop calling from a
// namespace it was not in while another user held the descriptors.
func TestAdmitPeerShort(t *testing.T) {
	s := &Server{}
	h := s.admit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for _, tc := range []struct {
		name  string
		peer  Peer
		path  string
		code  int
		retry bool
	}{
		{"short", Peer{Pid: 7, UID: 1000, OtherPidNS: true, Short: true}, Version + "/release", http.StatusServiceUnavailable, true},
		{"other namespace", Peer{Pid: 7, UID: 1000, OtherPidNS: true, PidNS: 4026532000}, Version + "/release", http.StatusForbidden, false},
		{"unread namespace", Peer{Pid: 7, UID: 1000, OtherPidNS: true}, Version + "/release", http.StatusForbidden, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tc.path, nil)
			r = r.WithContext(context.WithValue(r.Context(), peerKey{}, tc.peer))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.code || (w.Header().Get("Retry-After") != "") != tc.retry {
				t.Errorf("answer %d (Retry-After %q), want %d (retry %v): %s", w.Code, w.Header().Get("Retry-After"), tc.code, tc.retry, w.Body)
			}
		})
	}
}
