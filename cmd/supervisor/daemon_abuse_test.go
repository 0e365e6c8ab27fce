package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

const nobody = 65534

func rawClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 256,
	}}
}

func TestIntegrationDaemonOtherUser(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", fmt.Sprint(nobody))
	mine := d.launch(t, "--owner", "root", "--", "sleep", "1000")
	cred := &syscall.Credential{Uid: nobody, Gid: nobody}

	code, out, errs := d.run(t, cred, "list", "--json")
	if code != 0 {
		t.Fatalf("list as nobody: exit %d: %s", code, errs)
	}
	if strings.Contains(out, mine.ID) {
		t.Errorf("nobody's list shows root's claim %s", mine.ID)
	}
	// Another user's claim is answered as one that does not exist: a
	// release said 77 "belongs to another user", and show and output
	// named the store's path for one that does not exist only.
	none := "g-aaaaaaaaaaaa"
	for _, cmd := range []string{"release", "show", "output"} {
		code, _, errs := d.run(t, cred, cmd, mine.ID)
		ncode, _, nerrs := d.run(t, cred, cmd, none)
		if code != exitNoProcess || code != ncode || strings.ReplaceAll(errs, mine.ID, none) != nerrs {
			t.Errorf("nobody's %s of root's claim: exit %d (%s); of a claim that does not exist: exit %d (%s); want both %d, alike", cmd, code, errs, ncode, nerrs, exitNoProcess)
		}
	}
	if code, _, errs := d.run(t, cred, "admit", fmt.Sprint(mine.Pid), mine.Token.String()); code != exitNoPerm {
		t.Errorf("nobody admitting root's process: exit %d (%s), want %d", code, errs, exitNoPerm)
	}
	if !owned(mine.Pid, mine.Token) || d.claim(t, mine.ID).State != store.Running {
		t.Fatal("root's grant was touched by another user")
	}
	// Asking to run as root is refused; what nobody launches runs as nobody.
	if c, err := rawCall(sock, cred, `{"argv":["sleep","1"],"uid":0}`); err != nil || !strings.Contains(c, "403") {
		t.Errorf("nobody asking for uid 0: %q %v, want 403", c, err)
	}
	code, out, errs = d.run(t, cred, "launch", "--json", "--cwd", "/", "--", "sleep", "1000")
	if code != 0 {
		t.Fatalf("launch as nobody: exit %d: %s", code, errs)
	}
	var theirs api.Claim
	if err := json.Unmarshal([]byte(out), &theirs); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", theirs.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" {
			if f[1] != fmt.Sprint(nobody) || f[2] != fmt.Sprint(nobody) {
				t.Errorf("nobody's launch runs with %q, want uid %d", line, nobody)
			}
		}
	}
	if code, _, errs := d.run(t, cred, "release", "--grace", "0s", theirs.ID); code != 0 {
		t.Errorf("nobody releasing its own grant: exit %d: %s", code, errs)
	}
}

// rawCall posts a launch body as another user, with curl in a subprocess
// (SO_PEERCRED names the connecting process), and returns the status line.
func rawCall(sock string, cred *syscall.Credential, body string) (string, error) {
	cmd := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", sock,
		"-H", "Content-Type: application/json", "-d", body, "http://x/v1/launch")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestIntegrationDaemonBadInput(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock)
	hc := rawClient(sock)
	huge := make([]string, 5000)
	for i := range huge {
		huge[i] = "x"
	}
	hugeArgv, _ := json.Marshal(map[string]any{"argv": huge})
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"oversize body", "POST", "/v1/launch", `{"argv":["` + strings.Repeat("a", api.MaxBodyBytes) + `"]}`, 413},
		{"bad json", "POST", "/v1/launch", `{"argv":`, 400},
		{"unknown field", "POST", "/v1/launch", `{"argv":["true"],"evil":1}`, 400},
		{"negative duration", "POST", "/v1/launch", `{"argv":["true"],"wall_clock":"-5s"}`, 400},
		{"huge argv", "POST", "/v1/launch", string(hugeArgv), 400},
		{"empty argv", "POST", "/v1/launch", `{"argv":[]}`, 400},
		{"NUL in argv", "POST", "/v1/launch", `{"argv":["a\u0000b"]}`, 400},
		{"relative cwd", "POST", "/v1/launch", `{"argv":["true"],"cwd":"tmp"}`, 400},
		{"trailing data", "POST", "/v1/admit", `{"pid":1,"token":"x"} {}`, 400},
		{"pid zero", "POST", "/v1/verify", `{"pid":0,"token":"v1:t:00000000000000000000000000000000:1:-"}`, 400},
		{"negative pid", "POST", "/v1/kill", `{"pid":-1,"token":"v1:t:00000000000000000000000000000000:1:-"}`, 400},
		{"bad token", "POST", "/v1/verify", `{"pid":1,"token":"nonsense"}`, 400},
		{"kill of a pid not held", "POST", "/v1/kill", fmt.Sprintf(`{"pid":%d,"token":%q}`, os.Getpid(), tokenOf(t, os.Getpid())), 403},
		{"admit of init", "POST", "/v1/admit", fmt.Sprintf(`{"pid":1,"token":%q}`, tokenOf(t, 1)), 403},
		{"bad claim id", "POST", "/v1/claims/..%2f..%2fetc/release", ``, 400},
		{"unknown claim", "GET", "/v1/claims/g-aaaaaaaaaaaa", ``, 404},
		{"tree without pid", "GET", "/v1/tree", ``, 400},
		{"unknown endpoint", "GET", "/v2/status", ``, 404},
		{"wrong method", "DELETE", "/v1/claims", ``, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, "http://x"+tt.path, strings.NewReader(tt.body))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, b, tt.want)
			}
			var eb api.ErrorBody
			if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
				t.Errorf("error body %q is not {\"error\": ...}", b)
			}
		})
	}
	if !owned(int32(os.Getpid()), tokenOf(t, os.Getpid())) {
		t.Fatal("the test process was signalled")
	}

	t.Logf("bad requests answered at %v", time.Now().Format(time.StampMilli))
	// 1,000 concurrent clients (one in twenty launching): every one
	// answered, none lost.
	const n, every = 1000, 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	ids := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := api.NewClient(sock)
			defer c.Close()
			if i%every == 0 {
				cl, err := c.Launch(context.Background(), &api.LaunchRequest{Argv: []string{"sleep", "1000"}, Cwd: "/"})
				if err != nil {
					errs <- err
					return
				}
				ids <- cl.ID
				return
			}
			if _, err := c.Status(context.Background()); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	t.Logf("concurrent clients answered at %v", time.Now().Format(time.StampMilli))
	close(errs)
	close(ids)
	for err := range errs {
		t.Errorf("concurrent client: %v", err)
	}
	launched := 0
	for id := range ids {
		if d.claim(t, id).State != store.Running {
			t.Errorf("claim %s not running", id)
		}
		launched++
	}
	if launched != n/every {
		t.Errorf("launched %d, want %d", launched, n/every)
	}
	if _, err := d.client.Status(context.Background()); err != nil {
		t.Fatalf("daemon not serving after the abuse: %v\n%s", err, d.stderr)
	}
	var buf bytes.Buffer
	buf.WriteString(d.stderr.String())
	if strings.Contains(buf.String(), "panic") {
		t.Errorf("daemon stderr mentions a panic:\n%s", buf.String())
	}
}
