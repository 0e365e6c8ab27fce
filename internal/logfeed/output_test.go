package logfeed

import (
	"context"
	"errors"
	"net"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/procsupervisor/supervisor/internal/verdict"
)

func TestParseOutput(t *testing.T) {
	tests := []struct {
		in   string
		want Output
		err  bool
	}{
		{"", Output{Kind: OutputStdout}, false},
		{"stdout", Output{Kind: OutputStdout}, false},
		{"file:/var/log/supervisor.json", Output{Kind: OutputFile, Path: "/var/log/supervisor.json"}, false},
		{"file:rel.log", Output{Kind: OutputFile, Path: "rel.log"}, false},
		{"syslog", Output{Kind: OutputSyslog, Network: "unix", Path: "/dev/log"}, false},
		{"syslog:/run/systemd/journal/syslog", Output{Kind: OutputSyslog, Network: "unix", Path: "/run/systemd/journal/syslog"}, false},
		{"syslog:udp://10.0.0.1:514", Output{Kind: OutputSyslog, Network: "udp", Addr: "10.0.0.1:514"}, false},
		{"syslog:tcp://[::1]:6514", Output{Kind: OutputSyslog, Network: "tcp", Addr: "[::1]:6514"}, false},
		{"syslog:tcp://logs.example:601", Output{Kind: OutputSyslog, Network: "tcp", Addr: "logs.example:601"}, false},
		{"file:", Output{}, true},
		{"syslog:", Output{}, true},
		{"syslog:relative.sock", Output{}, true},
		{"syslog:udp://host", Output{}, true},
		{"syslog:udp://:514", Output{}, true},
		{"syslog:udp://h:0", Output{}, true},
		{"syslog:udp://h:65536", Output{}, true},
		{"syslog:udp://h:0514", Output{}, true},
		{"syslog:tls://h:6514", Output{}, true},
		{"stderr", Output{}, true},
		{"file:/a\x00b", Output{}, true},
	}
	for _, tt := range tests {
		got, err := ParseOutput(tt.in)
		if tt.err {
			if !errors.Is(err, ErrConfig) {
				t.Errorf("ParseOutput(%q) = %+v, %v; want an ErrConfig", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseOutput(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if again, err := ParseOutput(got.String()); err != nil || again != got {
			t.Errorf("ParseOutput(%q.String() = %q) = %+v, %v; want %+v", tt.in, got.String(), again, err, got)
		}
	}
}

func FuzzParseOutput(f *testing.F) {
	for _, s := range []string{"", "stdout", "file:/x", "syslog", "syslog:/dev/log", "syslog:udp://h:514", "syslog:tcp://[::1]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseOutput(s)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("ParseOutput(%q) error %v does not wrap ErrConfig", s, err)
			}
			return
		}
		again, err := ParseOutput(o.String())
		if err != nil || again != o {
			t.Fatalf("ParseOutput(%q) = %+v; its String %q parses to %+v, %v", s, o, o.String(), again, err)
		}
	})
}

// rfc5424 matches the header this feed writes: PRI VERSION TIMESTAMP
// HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA, then the MSG.
var rfc5424 = regexp.MustCompile(`^<(\d{1,3})>1 (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) ([!-~]{1,255}) supervisor (\d+) ([!-~]{1,32}) - (\{.*\})$`)

// TestSyslogUDP: one datagram per line, each a well-formed RFC 5424
// message (the rsyslog test covers the unix socket and TCP).
func TestSyslogUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	l, err := New(Config{Output: "syslog:udp://" + pc.LocalAddr().String(), Hostname: "my host"})
	if err != nil {
		t.Fatal(err)
	}
	l.Verdict(verdict.Verdict{Pid: 7, Result: verdict.Owned})
	l.Reconcile(Reconcile{Seen: 1, Failed: 1})
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pri    int
		action string
	}{{facilityDaemon*8 + int(sevInfo), ActionVerdict}, {facilityDaemon*8 + int(sevWarning), ActionReconcile}}
	buf := make([]byte, 64<<10)
	for i, w := range want {
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			t.Fatal(err)
		}
		m := rfc5424.FindSubmatch(buf[:n])
		if m == nil {
			t.Fatalf("datagram %d is not an RFC 5424 message: %q", i, buf[:n])
		}
		if string(m[1]) != strconv.Itoa(w.pri) || string(m[3]) != "my_host" || string(m[4]) != strconv.Itoa(os.Getpid()) || string(m[5]) != w.action {
			t.Errorf("datagram %d header: pri %s host %s procid %s msgid %s; want %d my_host %d %s", i, m[1], m[3], m[4], m[5], w.pri, os.Getpid(), w.action)
		}
		if line := decodeLines(t, m[6]); getString(line[0], "event.action") != w.action {
			t.Errorf("datagram %d MSG is not the %s line: %s", i, w.action, m[6])
		}
	}
}
