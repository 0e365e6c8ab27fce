package logfeed

import (
	"testing"
	"time"
)

func TestAppendRFC3339Micro(t *testing.T) {
	for _, tt := range []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("x", -7*3600)),
		time.Unix(0, 0),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		got := string(appendRFC3339Micro(nil, tt))
		want := tt.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
		if got != want {
			t.Errorf("appendRFC3339Micro(%v) = %q, want %q", tt, got, want)
		}
	}
}

func FuzzAppendRFC3339Micro(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(1795969220), int64(755123456))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tt := time.Unix(sec, nsec)
		got := string(appendRFC3339Micro(nil, tt))
		if want := tt.UTC().Format("2006-01-02T15:04:05.000000Z07:00"); got != want {
			t.Fatalf("appendRFC3339Micro(%v) = %q, want %q", tt, got, want)
		}
	})
}
