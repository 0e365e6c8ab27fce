package logfeed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/procsupervisor/supervisor/internal/events"
)

// Kinds is the set of process event kinds the feed writes a line for
// (Config.ProcessEvents): a bit per events.Kind, so that the test on the
// event path is a shift and a mask. Losses are not a kind of it: they are
// always written.
//
// Its text form, read by ParseKinds, is a boolean (true: every kind;
// false: none) or a comma-separated list of distinct kinds ("exec,exit").
// It is a flag.Value that is a boolean flag (a bare --flag means true),
// and it decodes from a JSON boolean or string.
type Kinds uint8

// Kinds of process events.
const (
	Forks    Kinds = 1 << events.Fork
	Execs    Kinds = 1 << events.Exec
	Exits    Kinds = 1 << events.Exit
	AllKinds       = Forks | Execs | Exits
)

// kindNames are the names ParseKinds takes, in the order String writes them.
var kindNames = [...]struct {
	name string
	k    Kinds
}{{"fork", Forks}, {"exec", Execs}, {"exit", Exits}}

// maxKindsText bounds the text ParseKinds reads (the longest valid list,
// "fork,exec,exit", with room for spaces).
const maxKindsText = 64

// Has reports whether k holds kind.
func (k Kinds) Has(kind events.Kind) bool { return k&(1<<kind) != 0 }

// String is "false" for no kind, else the kinds joined by commas in the
// order fork, exec, exit. ParseKinds reads it back.
func (k Kinds) String() string {
	if k == 0 {
		return "false"
	}
	var b strings.Builder
	for _, n := range kindNames {
		if k&n.k != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(n.name)
		}
	}
	if rest := k &^ AllKinds; rest != 0 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "0x%x", uint8(rest))
	}
	return b.String()
}

// ParseKinds reads a boolean in strconv.ParseBool's forms (true is every
// kind, false none) or a comma-separated list of kinds from fork, exec and
// exit, each at most once (spaces around a kind are ignored). An unknown
// kind, an empty list or item, or a kind given twice is an error that
// names the value and wraps ErrConfig.
func ParseKinds(s string) (Kinds, error) {
	if len(s) > maxKindsText {
		return 0, fmt.Errorf("process event kinds %.*q...: longer than %d bytes: %w", maxKindsText, s, maxKindsText, ErrConfig)
	}
	if b, err := strconv.ParseBool(s); err == nil {
		if b {
			return AllKinds, nil
		}
		return 0, nil
	}
	var k Kinds
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		n, ok := kindNamed(item)
		switch {
		case item == "":
			return 0, fmt.Errorf("process event kinds %q: an empty kind (want true, false, or a list of fork, exec, exit): %w", s, ErrConfig)
		case !ok:
			return 0, fmt.Errorf("process event kinds %q: unknown kind %q (want true, false, or a list of fork, exec, exit): %w", s, item, ErrConfig)
		case k&n != 0:
			return 0, fmt.Errorf("process event kinds %q: %s given twice: %w", s, item, ErrConfig)
		}
		k |= n
	}
	return k, nil
}

func kindNamed(name string) (Kinds, bool) {
	for _, n := range kindNames {
		if n.name == name {
			return n.k, true
		}
	}
	return 0, false
}

// Set parses s (ParseKinds) into k: k is a flag.Value.
func (k *Kinds) Set(s string) error {
	v, err := ParseKinds(s)
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// IsBoolFlag makes a bare --flag mean true (every kind); a list needs
// the --flag=LIST form.
func (k *Kinds) IsBoolFlag() bool { return true }

// UnmarshalJSON reads a JSON boolean, or a string that ParseKinds reads.
// Anything else (null, a number, a list) is an error.
func (k *Kinds) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch string(b) {
	case "true":
		*k = AllKinds
		return nil
	case "false":
		*k = 0
		return nil
	}
	var s string
	if len(b) == 0 || b[0] != '"' || json.Unmarshal(b, &s) != nil {
		return fmt.Errorf("process event kinds %.*s: want true, false or a string such as \"exec,exit\": %w", maxKindsText, b, ErrConfig)
	}
	return k.Set(s)
}

// MarshalJSON writes true for every kind, false for none, else the list
// as a string: what UnmarshalJSON reads back.
func (k Kinds) MarshalJSON() ([]byte, error) {
	switch k {
	case AllKinds:
		return []byte("true"), nil
	case 0:
		return []byte("false"), nil
	}
	return json.Marshal(k.String())
}
