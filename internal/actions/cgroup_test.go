package actions

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/procsupervisor/supervisor/internal/procfs"
)

func TestParseCgroupProcs(t *testing.T) {
	tests := []struct {
		in   string
		want []int32
		ok   bool
	}{
		{"", nil, true},
		{"\n", nil, true},
		{"1\n42\n4194304\n", []int32{1, 42, 4194304}, true},
		{"42\n0\n", nil, false},
		{"42\n-7\n", nil, false},
		{"42\nx\n", nil, false},
		{"2147483648\n", nil, false},
	}
	for _, tt := range tests {
		got, err := ParseCgroupProcs([]byte(tt.in))
		if (err == nil) != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("ParseCgroupProcs(%q) = %v, %v, want %v (ok %v)", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, procfs.ErrMalformed) {
			t.Errorf("ParseCgroupProcs(%q) error %v does not wrap procfs.ErrMalformed", tt.in, err)
		}
	}
}

// FuzzParseCgroupProcs: what the parser accepts is every field of the
// input, each a positive pid, in order; what it refuses wraps ErrMalformed.
func FuzzParseCgroupProcs(f *testing.F) {
	f.Add([]byte("1\n42\n"))
	f.Add([]byte("42\n0\n"))
	f.Add([]byte(" 7\t+8\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		pids, err := ParseCgroupProcs(b)
		if err != nil {
			if !errors.Is(err, procfs.ErrMalformed) {
				t.Fatalf("error %v does not wrap procfs.ErrMalformed", err)
			}
			return
		}
		fields := bytes.Fields(b)
		if len(pids) != len(fields) {
			t.Fatalf("%d pids from %d fields", len(pids), len(fields))
		}
		for i, p := range pids {
			if p <= 0 {
				t.Fatalf("pid %d accepted", p)
			}
			if v, err := strconv.ParseInt(string(fields[i]), 10, 32); err != nil || int32(v) != p {
				t.Fatalf("pid %d from field %q", p, fields[i])
			}
		}
	})
}
