package logfeed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// rsyslog is a private rsyslogd listening on a unix socket and on TCP in a
// temporary directory, writing what it receives, one message a line, with
// the RFC 5424 header fields it parsed.
type rsyslog struct {
	dir, sock, out string
	tcpPort        int
}

// rsyslogFields separates the fields of a line of rsyslog's output file;
// the message, which may hold it too, is the last field.
const rsyslogFields = "|"

func startRsyslog(t *testing.T) *rsyslog {
	t.Helper()
	bin, err := exec.LookPath("rsyslogd")
	if err != nil {
		if bin = "/usr/sbin/rsyslogd"; !fileExists(bin) {
			testenv.Skip(t, "rsyslogd not installed (Debian package rsyslog)")
		}
	}
	dir := t.TempDir()
	r := &rsyslog{dir: dir, sock: filepath.Join(dir, "log.sock"), out: filepath.Join(dir, "out.log")}
	portFile := filepath.Join(dir, "tcp.port")
	conf := fmt.Sprintf(`global(workDirectory=%q maxMessageSize="64k")
module(load="imuxsock" SysSock.Use="off")
module(load="imtcp")
input(type="imuxsock" Socket=%q UseSpecialParser="off" ParseHostname="on" RateLimit.Interval="0")
input(type="imtcp" port="0" address="127.0.0.1" listenPortFileName=%q)
template(name="fields" type="string" string="%%pri%%|%%app-name%%|%%procid%%|%%msgid%%|%%hostname%%|%%timereported:::date-rfc3339%%|%%protocol-version%%|%%structured-data%%|%%msg%%\n")
*.* action(type="omfile" file=%q template="fields")
`, dir, r.sock, portFile, r.out)
	confPath := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	// rsyslogd runs on with a broken configuration: check it first.
	if out, err := exec.Command(bin, "-N1", "-f", confPath).CombinedOutput(); err != nil {
		t.Fatalf("rsyslogd rejects the test configuration: %v\n%s", err, out)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-n", "-f", confPath, "-i", filepath.Join(dir, "rsyslogd.pid"))
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rsyslogd: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		if t.Failed() {
			t.Logf("rsyslogd output: %s", stderr.String())
		}
	})
	// Wait until both inputs listen (or rsyslogd gave up).
	testenv.Eventually(t, time.Minute, func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("rsyslogd exited (%v): %s", err, stderr.String())
		default:
		}
		if !fileExists(r.sock) {
			return false
		}
		b, _ := os.ReadFile(portFile)
		r.tcpPort, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return r.tcpPort != 0
	}, "rsyslogd did not listen on %s and write its TCP port to %s", r.sock, portFile)
	return r
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// received waits until rsyslogd wrote n messages after the first skip
// ones, and returns them split into their fields. (rsyslogd keeps its
// output file open: tests share it and skip what earlier ones received.)
func (r *rsyslog) received(t *testing.T, skip, n int) [][]string {
	t.Helper()
	var b []byte
	var lines []string
	if !testenv.Poll(time.Minute, func() bool {
		b, _ = os.ReadFile(r.out)
		lines = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		return len(b) > 0 && len(lines) >= skip+n
	}) {
		t.Fatalf("rsyslogd did not write %d messages after the first %d; it wrote:\n%s", n, skip, b)
	}
	var out [][]string
	for _, l := range lines[skip:] {
		out = append(out, strings.SplitN(l, rsyslogFields, 9))
	}
	return out
}

// TestSyslogRsyslog sends lines to a real rsyslogd over a unix socket and
// over TCP (octet counting), and checks what it parsed: the RFC 5424
// header (priority, app name, pid, MSGID = event.action, hostname,
// timestamp) and the JSON line as the message, intact.
func TestSyslogRsyslog(t *testing.T) {
	r := startRsyslog(t)
	skip := 0
	for _, tc := range []struct {
		name, output string
	}{
		{"unix", "syslog:" + r.sock},
		{"tcp", fmt.Sprintf("syslog:tcp://127.0.0.1:%d", r.tcpPort)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(Config{Output: tc.output, Hostname: "host-" + tc.name, ProcessEvents: AllKinds})
			if err != nil {
				t.Fatal(err)
			}
			before := time.Now().Add(-time.Second)
			tok, _ := token.Parse("v1:t:0123456789abcdef0123456789abcdef:99:-")
			l.Verdict(verdict.Verdict{Pid: 4242, Token: tok, Result: verdict.Foreign, Reason: "pid reissued: \"quoted\" and ünïcode", Mechanism: "ebpf"})
			ev := events.Event{Kind: events.Exec, Pid: 4243, Mechanism: events.EBPF, Exe: "/bin/x", Argv: []string{"x", "a b", `c"d`}}
			l.Event(&ev)
			l.Lost(events.Netlink, 5)
			if err := l.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if st := l.Stats(); st.Written != 3 || st.Dropped != 0 {
				t.Fatalf("Stats %+v, want 3 written", st)
			}
			got := r.received(t, skip, 3)
			skip += len(got)
			want := []struct {
				pri    int
				msgid  string
				action string
			}{
				{facilityDaemon*8 + int(sevNotice), ActionVerdict, ActionVerdict},
				{facilityDaemon*8 + int(sevInfo), ActionProcessExec, ActionProcessExec},
				{facilityDaemon*8 + int(sevWarning), ActionEventsLost, ActionEventsLost},
			}
			for i, f := range got {
				if len(f) != 9 {
					t.Fatalf("message %d: %d fields %q", i, len(f), f)
				}
				if i >= len(want) {
					t.Fatalf("unexpected message %q", f)
				}
				w := want[i]
				if f[0] != strconv.Itoa(w.pri) || f[1] != "supervisor" || f[2] != strconv.Itoa(os.Getpid()) ||
					f[3] != w.msgid || f[4] != "host-"+tc.name || f[6] != "1" || f[7] != "-" {
					t.Errorf("message %d header: pri %s app %s procid %s msgid %s host %s version %s sd %s; want %d supervisor %d %s host-%s 1 -",
						i, f[0], f[1], f[2], f[3], f[4], f[6], f[7], w.pri, os.Getpid(), w.msgid, tc.name)
				}
				if ts, err := time.Parse(time.RFC3339Nano, f[5]); err != nil || ts.Before(before) {
					t.Errorf("message %d: timestamp %q (%v)", i, f[5], err)
				}
				line := decodeLines(t, []byte(f[8]))
				if len(line) != 1 || getString(line[0], "event.action") != w.action {
					t.Errorf("message %d: MSG %q is not the %s JSON line", i, f[8], w.action)
				}
				if i == 0 && getString(line[0], "event.reason") != "pid reissued: \"quoted\" and ünïcode" {
					t.Errorf("event.reason came through as %q", getString(line[0], "event.reason"))
				}
			}
		})
	}
}

// TestSyslogReceiverRestart: while the receiver is away lines are dropped
// and counted; once it is back, the count arrives in a line of its own.
func TestSyslogReceiverRestart(t *testing.T) {
	r := startRsyslog(t)
	sock := filepath.Join(t.TempDir(), "gone.sock")
	l, err := New(Config{Output: "syslog:" + sock})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	l.Verdict(verdict.Verdict{Pid: 1, Result: verdict.Gone})
	l.Verdict(verdict.Verdict{Pid: 2, Result: verdict.Gone})
	flush(t, l)
	if st := l.Stats(); st.Dropped != 2 {
		t.Fatalf("Stats %+v with no receiver, want 2 dropped", st)
	}
	// The receiver appears at the path.
	if err := os.Symlink(r.sock, sock); err != nil {
		t.Fatal(err)
	}
	l.Verdict(verdict.Verdict{Pid: 3, Result: verdict.Gone})
	flush(t, l)
	got := r.received(t, 0, 2)
	if got[0][3] != ActionVerdict || got[1][3] != ActionLogLinesDropped {
		t.Fatalf("received %q, want the verdict then the drop report", got)
	}
	line := decodeLines(t, []byte(got[1][8]))
	if n, _ := getInt(line[0], "supervisor.dropped_lines"); n != 2 {
		t.Errorf("dropped_lines = %d, want 2", n)
	}
}
