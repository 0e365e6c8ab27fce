package logfeed

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// facilityDaemon is the syslog facility of every message (3, "daemon").
const facilityDaemon = 3

// syslogTimeout bounds one write to a network syslog receiver: a receiver
// that stalls longer costs the line and a reconnect, not the drain.
const syslogTimeout = 5 * time.Second

// syslogSink sends each line as one RFC 5424 message: over a unix datagram
// socket (or a unix stream socket, newline-terminated), one UDP datagram,
// or TCP with octet-counting framing (RFC 6587). The MSG part is the JSON
// line without a BOM: RFC 5424 then calls it MSG-ANY, and JSON consumers
// downstream do not trip over the BOM.
type syslogSink struct {
	out      Output
	mu       sync.Mutex // conn and closed: close may run while the drain writes
	closed   bool
	conn     net.Conn
	stream   bool // a unix stream socket: newline framing
	hostname string
	procid   string
	msg      []byte // scratch: the framed message
	body     []byte // scratch: the RFC 5424 message
}

func newSyslogSink(out Output, hostname string) *syslogSink {
	if hostname == "" {
		hostname = "-"
	}
	return &syslogSink{out: out, hostname: sanitizeHeader(hostname, 255), procid: strconv.Itoa(os.Getpid())}
}

// sanitizeHeader keeps a header field to printable US-ASCII without spaces.
func sanitizeHeader(s string, max int) string {
	b := []byte(s)
	for i, c := range b {
		if c < 33 || c > 126 {
			b[i] = '_'
		}
	}
	if len(b) > max {
		b = b[:max]
	}
	return string(b)
}

// connLocked returns the connection, dialling when there is none.
func (s *syslogSink) connLocked() (net.Conn, error) {
	if s.closed {
		return nil, errSinkClosed
	}
	if s.conn == nil {
		if err := s.dial(); err != nil {
			return nil, err
		}
	}
	return s.conn, nil
}

func (s *syslogSink) dial() error {
	switch s.out.Network {
	case "unix":
		c, err := net.Dial("unixgram", s.out.Path)
		if err != nil && errors.Is(err, syscall.EPROTOTYPE) {
			c, err = net.Dial("unix", s.out.Path)
			s.stream = err == nil
		}
		if err != nil {
			return fmt.Errorf("connect to syslog: %w", err)
		}
		s.conn = c
	default:
		c, err := net.DialTimeout(s.out.Network, s.out.Addr, syslogTimeout)
		if err != nil {
			return fmt.Errorf("connect to syslog: %w", err)
		}
		s.conn, s.stream = c, false
	}
	return nil
}

// format renders one RFC 5424 message:
// <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID STRUCTURED-DATA MSG
func (s *syslogSink) format(m, line []byte, sev severity, action string, now time.Time) []byte {
	for len(line) > 0 && line[len(line)-1] == '\n' {
		line = line[:len(line)-1]
	}
	m = append(m, '<')
	m = strconv.AppendInt(m, int64(facilityDaemon*8+int(sev)), 10)
	m = append(m, '>', '1', ' ')
	m = appendRFC3339Micro(m, now)
	m = append(m, ' ')
	m = append(m, s.hostname...)
	m = append(m, " supervisor "...)
	m = append(m, s.procid...)
	m = append(m, ' ')
	if action == "" {
		action = "-"
	}
	m = append(m, action...)
	m = append(m, " - "...)
	return append(m, line...)
}

func (s *syslogSink) write(line []byte, sev severity, action string) (delivered, lost int, err error) {
	s.mu.Lock()
	conn, err := s.connLocked()
	stream := s.stream
	s.mu.Unlock()
	if err != nil {
		return 0, 1, err
	}
	now := time.Now()
	m := s.format(s.body[:0], line, sev, action, now)
	s.body = m
	switch {
	case s.out.Network == "tcp":
		// Octet counting (RFC 6587): "LEN SP MSG".
		s.msg = strconv.AppendInt(s.msg[:0], int64(len(m)), 10)
		s.msg = append(append(s.msg, ' '), m...)
		m = s.msg
	case stream:
		s.msg = append(append(s.msg[:0], m...), '\n')
		m = s.msg
	}
	if s.out.Network != "unix" {
		conn.SetWriteDeadline(now.Add(syslogTimeout))
	}
	if _, err = conn.Write(m); err != nil {
		s.mu.Lock()
		if s.conn == conn {
			s.conn = nil
		}
		s.mu.Unlock()
		conn.Close()
		return 0, 1, fmt.Errorf("write to syslog: %w", err)
	}
	return 1, 0, nil
}

func (s *syslogSink) flush() (delivered, lost int, err error) { return 0, 0, nil }

func (s *syslogSink) reopen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	_, err := s.connLocked()
	return err
}

func (s *syslogSink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}
