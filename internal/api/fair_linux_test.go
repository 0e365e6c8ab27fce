package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// The fairness tests connect as other users: SO_PEERCRED names the process
// that connected, so each user is a copy of this test binary run with that
// uid (helperEnv selects the helper instead of the tests).
const (
	helperEnv = "SUPERVISOR_API_TEST_HELPER"
	nobody    = 65534
	// other is a second unprivileged uid; the kernel needs no user
	// database entry for it.
	other = 65533
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Args[len(os.Args)-2], os.Args[len(os.Args)-1]))
	}
	os.Exit(testenv.Main(m))
}

// request sends one GET /v1/status on conn and reads the answer: "200",
// "503 <error>", ..., or "closed" when the server closed the connection
// without an answer.
func request(conn net.Conn, br *bufio.Reader) string { return requestPath(conn, br, "/v1/status") }

// requestPath is request for GET path.
func requestPath(conn net.Conn, br *bufio.Reader, path string) string {
	if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "closed"
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "hung"
		}
		return "closed"
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return "200"
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

// helperDeadline bounds every read of a helper: an answer that does not
// come by then is a hang, reported as "hung".
const helperDeadline = 30 * time.Second

// helper runs as another user. Modes, with the socket and a count n:
//   - hold: open n connections at once, one request on each, print one
//     line per answer, then keep the connections until stdin closes;
//   - get: n requests one after the other on one keep-alive connection,
//     one line each;
//   - slow: open n connections, send half a request on each, print
//     "ready" and keep them until stdin closes;
//   - flood: n goroutines connect and close at once in a loop, as fast
//     as they can (non-blocking connects, as curl's), from "ready" until
//     stdin closes;
//   - confine: on one connection, GET /v1/claims, then give a thread
//     other than the main one no_new_privs, then GET /v1/claims again,
//     one line each.
func helper(mode, sock, count string) int {
	n, _ := strconv.Atoi(count)
	dial := func() (net.Conn, *bufio.Reader, error) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			return nil, nil, err
		}
		c.SetDeadline(time.Now().Add(helperDeadline))
		return c, bufio.NewReader(c), nil
	}
	switch mode {
	case "hold":
		lines := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				c, br, err := dial()
				if err != nil {
					lines[i] = "dial " + err.Error()
					return
				}
				lines[i] = request(c, br) // c stays open until the helper ends
			})
		}
		wg.Wait()
		fmt.Println(strings.Join(lines, "\n"))
	case "get":
		c, br, err := dial()
		if err != nil {
			fmt.Println("dial", err)
			return 1
		}
		for range n {
			fmt.Println(request(c, br))
		}
		return 0
	case "slow":
		for range n {
			c, _, err := dial()
			if err != nil {
				fmt.Println("dial", err)
				return 1
			}
			io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHo")
		}
		fmt.Println("ready")
	case "confine":
		c, br, err := dial()
		if err != nil {
			fmt.Println("dial", err)
			return 1
		}
		fmt.Println(requestPath(c, br, "/v1/claims"))
		done := make(chan error)
		// A thread but the main one: a goroutine that finds itself on
		// the main thread keeps it, locked, and hands on to another.
		var confine func()
		confine = func() {
			runtime.LockOSThread() // never unlocked: the thread keeps it
			if unix.Gettid() == unix.Getpid() {
				go confine()
				select {}
			}
			done <- unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
			select {} // the thread lives on
		}
		go confine()
		if err := <-done; err != nil {
			fmt.Println("no_new_privs", err)
			return 1
		}
		fmt.Println(requestPath(c, br, "/v1/claims"))
	case "flood":
		var stop atomic.Bool
		for range n {
			go func() {
				for !stop.Load() {
					fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
					if err != nil {
						continue
					}
					_ = unix.Connect(fd, &unix.SockaddrUnix{Name: sock})
					unix.Close(fd)
				}
			}()
		}
		fmt.Println("ready")
		os.Stdout.Close()
		io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
		return 0
	default:
		return 2
	}
	os.Stdout.Close()
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// fairEnv is a server on a socket every user may reach.
type fairEnv struct {
	sock string
}

func newFairEnv(t *testing.T, lim Limits) *fairEnv {
	t.Helper()
	testenv.RequireRoot(t)
	dir, err := os.MkdirTemp("", "apifair")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &fairEnv{sock: filepath.Join(dir, "s")}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	serveOn(t, e.sock, NewServer(fakeBackend{}, nil, WithLimits(lim)))
	if err := os.Chmod(e.sock, 0o777); err != nil {
		t.Fatal(err)
	}
	return e
}

// run runs the helper as uid and returns its output lines. For hold and
// slow, the helper keeps its connections until the test ends.
func (e *fairEnv) run(t *testing.T, uid uint32, mode string, n int) []string {
	t.Helper()
	cmd := testenv.SelfAs(t, &syscall.Credential{Uid: uid, Gid: uid}, []string{helperEnv + "=" + mode}, mode, e.sock, strconv.Itoa(n))
	b := testenv.Held(t, cmd) // the helper closes its stdout once done
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// tally counts answers by their first word ("200", "503", "closed", ...).
func tally(lines []string) map[string]int {
	n := map[string]int{}
	for _, l := range lines {
		n[strings.Fields(l + " ")[0]]++
	}
	return n
}

// askAsRoot asks for the status from this process (root).
func askAsRoot(t *testing.T, sock string) {
	t.Helper()
	c := NewClient(sock)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), helperDeadline)
	defer cancel()
	if _, err := c.Status(ctx); err != nil {
		t.Errorf("root's Status() = %v, want an answer", err)
	}
}

// TestIntegrationFairIdleConnections: one user holding 64+ idle keep-alive
// connections (a long idle timeout, so they stay) is served on its cap and
// refused beyond it, with a 503 or a close, never left hanging; root and
// another user are still answered.
func TestIntegrationFairIdleConnections(t *testing.T) {
	lim := Limits{UserConns: 4, IdleTimeout: Duration(time.Hour), ConnWait: Duration(10 * time.Millisecond)}
	e := newFairEnv(t, lim)
	const n = 70
	lines := e.run(t, nobody, "hold", n)
	got := tally(lines)
	if got["200"] != lim.UserConns || got["200"]+got["503"]+got["closed"] != n || got["503"] == 0 {
		t.Errorf("%d connections of one user: answers %v, want %d served, the rest 503 or closed, some 503", n, got, lim.UserConns)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "503") && !strings.Contains(l, `{"error":"too many connections: uid 65534 has 4 connections open (cap 4)`) {
			t.Errorf("refusal %q, want the JSON error naming the uid and its cap", l)
		}
	}
	askAsRoot(t, e.sock)
	if got := e.run(t, other, "get", 3); strings.Join(got, " ") != "200 200 200" {
		t.Errorf("another user's requests while one holds its cap: %q, want three 200", got)
	}
}

// TestIntegrationFairSharedReclaim: two users hold all the shared slots
// with idle keep-alive connections (a long idle timeout, so they stay);
// a third and a fourth user are served at once, each taking a slot from
// the user holding the most, instead of a 503 after the wait (the shared
// cap filled by a few uids kept every other user out for as long as
// they held it).
func TestIntegrationFairSharedReclaim(t *testing.T) {
	lim := Limits{UserConns: 4, SharedConns: 8, IdleTimeout: Duration(time.Hour), ConnWait: Duration(3 * time.Second)}
	e := newFairEnv(t, lim)
	for _, uid := range []uint32{nobody, other} {
		if got := e.run(t, uid, "hold", lim.UserConns); strings.Join(got, " ") != "200 200 200 200" {
			t.Fatalf("uid %d's %d connections: %q, want all served", uid, lim.UserConns, got)
		}
	}
	for _, uid := range []uint32{other - 1, other - 2} {
		if got := e.run(t, uid, "get", 2); strings.Join(got, " ") != "200 200" {
			t.Errorf("uid %d while two users hold the %d shared slots idle: %q, want two 200", uid, lim.SharedConns, got)
		}
	}
}

// TestIntegrationFairRate: a user over the rate cap gets 429 with a JSON
// error and Retry-After; another user, and root, do not.
func TestIntegrationFairRate(t *testing.T) {
	// A bucket that refills once in 1000 s: exactly Burst requests pass.
	lim := Limits{Rate: 0.001, Burst: 5}
	e := newFairEnv(t, lim)
	lines := e.run(t, nobody, "get", 8)
	if got := tally(lines); got["200"] != 5 || got["429"] != 3 {
		t.Errorf("8 requests with a burst of 5: %q, want 5 × 200 then 3 × 429", lines)
	}
	if l := lines[len(lines)-1]; !strings.Contains(l, `{"error":"rate limit: uid 65534 is over 0.001 requests a second (5 at once)`) {
		t.Errorf("429 body %q, want the JSON error with the uid and the limit", l)
	}
	if got := e.run(t, other, "get", 3); strings.Join(got, " ") != "200 200 200" {
		t.Errorf("another user's requests: %q, want three 200", got)
	}
	for range 10 {
		askAsRoot(t, e.sock)
	}
}

// TestIntegrationFairSlowClient: a user whose connections send half a
// request each (slowloris), more than it may hold, blocks nobody else; its
// own next connection is refused (503 or closed) or served once a slot
// frees, never left hanging.
func TestIntegrationFairSlowClient(t *testing.T) {
	lim := Limits{UserConns: 4, ConnWait: Duration(10 * time.Millisecond)}
	e := newFairEnv(t, lim)
	if got := e.run(t, nobody, "slow", 3*lim.UserConns+2); len(got) != 1 || got[0] != "ready" {
		t.Fatalf("slow helper: %q", got)
	}
	askAsRoot(t, e.sock)
	if got := e.run(t, other, "get", 2); strings.Join(got, " ") != "200 200" {
		t.Errorf("another user's requests beside a slow one: %q, want two 200", got)
	}
	if got := e.run(t, nobody, "get", 1); got[0] == "hung" || strings.HasPrefix(got[0], "dial") {
		t.Errorf("the slow user's own next request: %q, want an answer or a close", got)
	}
}

// TestIntegrationFairConnectFlood: processes of one user that connect
// and close in a loop (each connection costs the daemon an accept and a
// peer read) do not fill the listen backlog under root: every one of
// root's requests, each on a new connection as the CLI makes them, is
// answered. Before, the accept goroutine read each peer's namespaces
// itself and fell behind, and root's connects failed with EAGAIN. The
// daemon cannot accept faster than 4 processes connect on this VM's two
// cores, so it is the client's retry of EAGAIN (DialRetry) that gets
// root's connects in; the gate's faster loop makes the backlog's room
// come more often (50 requests beside one flooder: 17 s of retries
// before, 6 s after).
func TestIntegrationFairConnectFlood(t *testing.T) {
	e := newFairEnv(t, Limits{})
	const flooders, asks = 4, 20
	for range flooders {
		cmd := testenv.SelfAs(t, &syscall.Credential{Uid: nobody, Gid: nobody}, []string{helperEnv + "=flood"}, "flood", e.sock, "1")
		stdin, stdout := testenv.StartPiped(t, cmd)
		t.Cleanup(func() { stdin.Close(); cmd.Wait() })
		if b, _ := io.ReadAll(stdout); strings.TrimSpace(string(b)) != "ready" {
			t.Fatalf("flood helper: %q", b)
		}
	}
	time.Sleep(200 * time.Millisecond) // let the backlog fill, if it does
	failed := 0
	for i := range asks {
		c := NewClient(e.sock)
		ctx, cancel := context.WithTimeout(context.Background(), helperDeadline)
		if _, err := c.Status(ctx); err != nil {
			failed++
			t.Logf("root's request #%d: %v", i+1, err)
		}
		cancel()
		c.Close()
	}
	if failed > 0 {
		t.Errorf("%d of root's %d requests failed beside %d connect floods of another user, want none", failed, asks, flooders)
	}
}

// TestIntegrationPrivateSocketUnderFlood: the server also serves a private
// socket (PrivateSocket, mode 0600) on an accept loop of its own. While
// another user floods the shared socket with connects, root's one-shot
// connects to the private socket all succeed, without the retries the
// shared socket needs; and root's client goes there first, so it is
// served even when the shared socket answers nothing.
func TestIntegrationPrivateSocketUnderFlood(t *testing.T) {
	testenv.RequireRoot(t)
	dir := testenv.ReachableDir(t, 0o755)
	sock := filepath.Join(dir, "s")
	shared, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	priv, err := net.Listen("unix", PrivateSocket(sock))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(PrivateSocket(sock), 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewServer(fakeBackend{}, nil)
	go s.Serve(shared, priv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	const flooders, asks = 4, 20
	for range flooders {
		cmd := testenv.SelfAs(t, &syscall.Credential{Uid: nobody, Gid: nobody}, []string{helperEnv + "=flood"}, "flood", sock, "1")
		stdin, stdout := testenv.StartPiped(t, cmd)
		t.Cleanup(func() { stdin.Close(); cmd.Wait() })
		if b, _ := io.ReadAll(stdout); strings.TrimSpace(string(b)) != "ready" {
			t.Fatalf("flood helper: %q", b)
		}
	}
	time.Sleep(200 * time.Millisecond)
	failed := 0
	for i := range asks {
		c, err := net.Dial("unix", PrivateSocket(sock)) // once: no retry
		if err == nil {
			fmt.Fprint(c, "GET "+Version+"/status HTTP/1.1\r\nHost: x\r\n\r\n")
			var resp *http.Response
			if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			c.Close()
		}
		if err != nil {
			failed++
			t.Logf("root's connect #%d to the private socket: %v", i+1, err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of root's %d one-shot requests on the private socket failed beside %d connect floods of the shared one, want none", failed, asks, flooders)
	}
	// Root's client connects to the private socket first: with nothing
	// at the shared path it is still served.
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	c := NewClient(sock)
	defer c.Close()
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("root's client with the shared socket gone = %v, want served on the private one", err)
	}
}

// TestIntegrationRefuseConfinable: a server made WithRefuseConfinable
// answers a peer but root status alone once any of its threads has
// no_new_privs, checked at each request: a caller that connected first
// and confined a thread after (as a Landlock domain without TSYNC is) was
// served on its open connection.
func TestIntegrationRefuseConfinable(t *testing.T) {
	testenv.RequireRoot(t)
	sock := filepath.Join(testenv.ReachableDir(t, 0o755), "s")
	serveOn(t, sock, NewServer(fakeBackend{}, nil, WithRefuseConfinable()))
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	e := &fairEnv{sock: sock}
	lines := e.run(t, nobody, "confine", 1)
	if len(lines) != 2 || strings.Contains(lines[0], "sandboxed_callers") || !strings.HasPrefix(lines[1], "403") || !strings.Contains(lines[1], "sandboxed_callers") {
		t.Fatalf("a caller that gave a thread no_new_privs after connecting got %q, want served, then refused (403, sandboxed_callers)", lines)
	}
}
