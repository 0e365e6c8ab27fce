package proccon

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
)

// refStatField20 is field 20 (num_threads) of a /proc/PID/stat line, read
// apart from numThreads: the fields after comm start after the line's last
// ')' (comm may hold spaces and parentheses, no later field does), are
// separated by spaces, and the line ends with one newline. ok is false
// when the line has no ')' or fewer than 20 fields.
func refStatField20(line []byte) (tok string, ok bool) {
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return "", false
	}
	rest := strings.TrimSuffix(string(line[i+1:]), "\n")
	var fields []string // fields[0] is field 3, state
	for _, f := range strings.Split(rest, " ") {
		if f != "" {
			fields = append(fields, f)
		}
	}
	if len(fields) < 20-2 {
		return "", false
	}
	return fields[20-3], true
}

// refCanonical is tok's value when it is a count as the kernel prints one
// (%d of a non-negative int: "0" or digits without a leading zero) that
// fits an int32.
func refCanonical(tok string) (int32, bool) {
	if tok == "" || (tok[0] == '0' && tok != "0") {
		return 0, false
	}
	v, err := strconv.ParseUint(tok, 10, 64)
	if err != nil || v > math.MaxInt32 {
		return 0, false
	}
	return int32(v), true
}

// FuzzNumThreads: numThreads never panics nor writes its input; whenever
// an independent reading finds field 20 (counted after the last ')') to be
// a count as the kernel prints it, numThreads returns that count and true
// (0 included: the kernel prints 0 for a task whose signal struct is gone);
// and whenever numThreads returns true, its value is field 20 read as a
// decimal, so a line with no ')', fewer than 20 fields, or a field 20 that
// is not a decimal within an int32 gives false. Its only leniencies,
// allowed here: leading zeros (up to ten characters) and newlines ending
// the field.
func FuzzNumThreads(f *testing.F) {
	f.Fuzz(func(t *testing.T, line []byte) {
		in := bytes.Clone(line)
		got, ok := numThreads(line)
		if !bytes.Equal(in, line) {
			t.Fatalf("numThreads wrote to its input")
		}
		tok, found := refStatField20(line)
		if want, valid := refCanonical(tok); found && valid && (got != want || !ok) {
			t.Fatalf("numThreads(%q) = %d, %v; field 20 is %q, want %d, true", line, got, ok, tok, want)
		}
		if !ok {
			if got != 0 {
				t.Fatalf("numThreads(%q) = %d, false; want 0 with false", line, got)
			}
			return
		}
		if !found {
			t.Fatalf("numThreads(%q) = %d, true; the line has no field 20", line, got)
		}
		digits := strings.TrimRight(tok, "\n")
		v, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || v > math.MaxInt32 || int64(got) != int64(v) {
			t.Fatalf("numThreads(%q) = %d, true; field 20 is %q", line, got, tok)
		}
	})
}
