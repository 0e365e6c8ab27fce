package logfeed

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Output kinds.
const (
	OutputStdout = "stdout"
	OutputFile   = "file"
	OutputSyslog = "syslog"
)

// DefaultSyslogSocket is the local syslog socket "syslog" means.
const DefaultSyslogSocket = "/dev/log"

// Output is a parsed Config.Output.
type Output struct {
	Kind string // OutputStdout, OutputFile or OutputSyslog
	// Path is the file of OutputFile, or the unix socket of OutputSyslog
	// when Network is "unix".
	Path string
	// Network is "unix", "udp" or "tcp" for OutputSyslog.
	Network string
	// Addr is host:port for Network "udp" and "tcp".
	Addr string
}

// String returns the text form ParseOutput accepts.
func (o Output) String() string {
	switch o.Kind {
	case OutputFile:
		return "file:" + o.Path
	case OutputSyslog:
		if o.Network == "unix" {
			return "syslog:" + o.Path
		}
		return "syslog:" + o.Network + "://" + o.Addr
	}
	return OutputStdout
}

// ParseOutput parses an output: "stdout" (or ""), "file:PATH", "syslog"
// (the unix socket /dev/log), "syslog:/path/to/socket",
// "syslog:udp://host:port" or "syslog:tcp://host:port". Errors wrap
// ErrConfig.
func ParseOutput(s string) (Output, error) {
	bad := func(why string) (Output, error) {
		return Output{}, fmt.Errorf("log output %q: %s: %w", s, why, ErrConfig)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return bad("contains a NUL byte")
	}
	switch {
	case s == "" || s == OutputStdout:
		return Output{Kind: OutputStdout}, nil
	case s == OutputSyslog:
		return Output{Kind: OutputSyslog, Network: "unix", Path: DefaultSyslogSocket}, nil
	case strings.HasPrefix(s, "file:"):
		p := s[len("file:"):]
		if p == "" {
			return bad("no file name")
		}
		return Output{Kind: OutputFile, Path: p}, nil
	case strings.HasPrefix(s, "syslog:"):
		rest := s[len("syslog:"):]
		if strings.HasPrefix(rest, "/") {
			return Output{Kind: OutputSyslog, Network: "unix", Path: rest}, nil
		}
		network, addr, ok := strings.Cut(rest, "://")
		if !ok || (network != "udp" && network != "tcp") {
			return bad("want syslog:/socket/path, syslog:udp://host:port or syslog:tcp://host:port")
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return bad(err.Error())
		}
		if host == "" {
			return bad("no host")
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 || port != strconv.FormatUint(n, 10) {
			return bad("port is not a number from 1 to 65535")
		}
		return Output{Kind: OutputSyslog, Network: network, Addr: net.JoinHostPort(host, port)}, nil
	}
	return bad("want stdout, file:PATH or syslog[:ADDR]")
}
