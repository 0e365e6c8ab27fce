package main

import (
	"slices"
	"testing"
)

// TestRedactFlag: patterns collect in order; an empty one says "none" (the flag is
// set, so the installed config's patterns are not used) and adds nothing.
func TestRedactFlag(t *testing.T) {
	tests := []struct {
		args []string
		want []string
		set  bool
	}{
		{nil, nil, false},
		{[]string{""}, nil, true},
		{[]string{"--password=*", "-p *"}, []string{"--password=*", "-p *"}, true},
		{[]string{"", "ghp_*"}, []string{"ghp_*"}, true},
	}
	for _, tt := range tests {
		var f redactFlag
		for _, a := range tt.args {
			if err := f.Set(a); err != nil {
				t.Fatalf("Set(%q): %v", a, err)
			}
		}
		if !slices.Equal(f.pats, tt.want) || f.set != tt.set {
			t.Errorf("after %q: patterns %q set %v, want %q set %v", tt.args, f.pats, f.set, tt.want, tt.set)
		}
	}
}
