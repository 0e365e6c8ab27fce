package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// holdConnsEnv makes the test binary hold connections: it opens the number
// of connections the variable gives to the socket named by its argument,
// sends one status request on each, prints the tally of the answers
// ("200 16 503 20 closed 34") and keeps the connections until its stdin
// closes.
const holdConnsEnv = "SUPERVISOR_TEST_HOLD_CONNS"

func init() {
	v := os.Getenv(holdConnsEnv)
	if v == "" {
		return
	}
	n, _ := strconv.Atoi(v)
	var mu sync.Mutex
	tally := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			got := "closed"
			if c, err := net.Dial("unix", os.Args[len(os.Args)-1]); err != nil {
				got = "dial"
			} else {
				// An answer that does not come in time is a hang.
				c.SetDeadline(time.Now().Add(time.Minute))
				io.WriteString(c, "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				var ne net.Error
				switch {
				case err == nil:
					got = strconv.Itoa(resp.StatusCode)
				case errors.As(err, &ne) && ne.Timeout():
					got = "hung"
				}
			}
			mu.Lock()
			tally[got]++
			mu.Unlock()
		})
	}
	wg.Wait()
	fmt.Println("200", tally["200"], "503", tally["503"], "closed", tally["closed"], "other", n-tally["200"]-tally["503"]-tally["closed"])
	os.Stdout.Close()
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// TestIntegrationDaemonIdleConnections: one user opens 70 keep-alive
// connections to the daemon and holds them; it is served on its cap
// (api.DefaultLimits: 16) and the rest are refused (503 or closed), none
// left hanging, while root and another user still get their status.
func TestIntegrationDaemonIdleConnections(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))

	const n = 70
	hog := testenv.SelfAs(t, &syscall.Credential{Uid: nobody, Gid: nobody}, []string{holdConnsEnv + "=" + strconv.Itoa(n)}, sock)
	out := testenv.Held(t, hog)
	f := strings.Fields(string(out))
	if len(f) != 8 || f[1] != "16" || f[7] != "0" || f[3] == "0" {
		t.Errorf("%d connections of one user: %q, want 16 served, the rest 503 or closed, some 503, none hung", n, out)
	}
	// The 16 stay open, idle, while the others ask.
	if code, _, errs := d.run(t, nil, "status"); code != 0 {
		t.Errorf("root's status beside one user's held connections: exit %d: %s", code, errs)
	}
	other := &syscall.Credential{Uid: nobody - 1, Gid: nobody}
	if code, _, errs := d.run(t, other, "status"); code != 0 {
		t.Errorf("another user's status beside one user's held connections: exit %d: %s", code, errs)
	}
}
