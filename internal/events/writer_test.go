package events

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestTextHeaderColumns pins the header over AppendText's columns.
func TestTextHeaderColumns(t *testing.T) {
	want := fmt.Sprintf("%-6s %7s %7s  %-16s %s\n", "KIND", "PID", "PPID", "COMM", "TOKEN / DETAIL")
	if TextHeader != want {
		t.Errorf("TextHeader = %q, want %q", TextHeader, want)
	}
}

// TestWriterHoldsUntilStart writes an event before Start, as a source
// that runs before its caller printed the header does: the line waits for
// the header, then for the next flush, which comes within FlushEvery. The
// bubble's Wait orders the flusher's writes before the test's reads.
func TestWriterHoldsUntilStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		w := NewWriter(&out, false)
		ev := encodeCases[0].ev
		wrote := make(chan struct{})
		go func() { w.Write(&ev); close(wrote) }()
		synctest.Wait()
		select {
		case <-wrote:
			t.Fatal("Write returned before Start")
		default:
		}
		w.Start()
		<-wrote
		time.Sleep(FlushEvery)
		synctest.Wait()
		want := TextHeader + encodeCases[0].wantText + "\n"
		if got := out.String(); got != want {
			t.Errorf("output after %v = %q, want %q", FlushEvery, got, want)
		}
		if err := w.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
}

// TestWriterJSON checks JSON lines without a header, flushed by Close,
// and that nothing is written after Close.
func TestWriterJSON(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, true)
	w.Start()
	var want strings.Builder
	for _, c := range encodeCases {
		w.Write(&c.ev)
		want.WriteString(c.wantJSON + "\n")
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	w.Write(&encodeCases[0].ev)
	if got := out.String(); got != want.String() {
		t.Errorf("output = %q, want %q", got, want.String())
	}
}

// TestWriterNeverStarted closes a Writer whose source failed: a Write
// waiting for Start returns, and nothing is printed, not even the header.
func TestWriterNeverStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		w := NewWriter(&out, false)
		wrote := make(chan struct{})
		go func() { w.Write(&encodeCases[0].ev); close(wrote) }()
		synctest.Wait()
		if err := w.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		<-wrote
		if got := out.String(); got != "" {
			t.Errorf("output = %q, want none", got)
		}
	})
}
