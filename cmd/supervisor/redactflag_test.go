package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// TestRedactFlag: patterns collect in order; an empty one clears them and
// still counts as given (so the installed config's patterns are not used).
func TestRedactFlag(t *testing.T) {
	tests := []struct {
		args []string
		want []string
		set  bool
	}{
		{nil, nil, false},
		{[]string{"--redact-args", ""}, nil, true},
		{[]string{"--redact-args", "--password=*", "--redact-args", "-p *"}, []string{"--password=*", "-p *"}, true},
		{[]string{"--redact-args", "", "--redact-args", "ghp_*"}, []string{"ghp_*"}, true},
		{[]string{"--redact-args", "ghp_*", "--redact-args", ""}, nil, true},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("events", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		get := redactFlag(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatalf("parse %q: %v", tt.args, err)
		}
		pats, set := get()
		if !slices.Equal(pats, tt.want) || set != tt.set {
			t.Errorf("after %q: patterns %q set %v, want %q set %v", tt.args, pats, set, tt.want, tt.set)
		}
	}
}
