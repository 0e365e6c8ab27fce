package store

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestRewrite: Open with Rewrite rewrites the claims it changes, keeps
// their members, leaves the others and one that would break a limit as
// they were, and compacts the file so that the old bytes are gone from
// it; a second Open changes nothing. A leftover temporary file does not
// stop it.
func TestRewrite(t *testing.T) {
	const secret = "hunter2-rewrite-secret"
	s, path := openTemp(t, Options{})
	secretArg := "--password=" + secret
	g := fullGrant()
	g.Argv = []string{"db", secretArg}
	other := Claim{Kind: Job, Argv: []string{"make"}}
	big := Claim{Kind: Grant, Argv: []string{"big", secretArg + "-big"}}
	for _, c := range []*Claim{&g, &other, &big} {
		if err := s.Put(c); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(secret)) {
		t.Fatal("the secret is not in the file before the rewrite: the test proves nothing")
	}
	if err := os.WriteFile(compactTemp(path), []byte("leftover of a crash"), 0o600); err != nil {
		t.Fatal(err)
	}
	calls := 0
	hide := func(c *Claim) bool {
		calls++
		changed := false
		for i, a := range c.Argv {
			if strings.Contains(a, secret) {
				c.Argv[i] = "--password=[REDACTED]"
				if c.ID == big.ID {
					c.Argv[i] += strings.Repeat("x", DefaultLimits.MaxArgvBytes)
				}
				changed = true
			}
		}
		return changed
	}
	s, err := Open(path, Options{Rewrite: hide})
	if err != nil {
		t.Fatalf("Open with Rewrite = %v", err)
	}
	if calls != 3 {
		t.Errorf("Rewrite called %d times, want once per claim (3)", calls)
	}
	for _, c := range []struct {
		id   string
		want []string
	}{
		{g.ID, []string{"db", "--password=[REDACTED]"}},
		{other.ID, []string{"make"}},
		{big.ID, big.Argv}, // the rewrite would break MaxArgvBytes: kept
	} {
		got, err := s.Get(c.id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Argv, c.want) {
			t.Errorf("claim %s after the rewrite: argv %q, want %q", c.id, got.Argv, c.want)
		}
		if c.id == g.ID && !claimsEqual(withArgv(got, g.Argv), g) {
			t.Errorf("the rewrite changed more than argv:\n%+v\nwant\n%+v", got, g)
		}
	}
	s.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(secret)); n != 1 { // big's own, kept
		t.Errorf("the file holds the secret %d times after the rewrite, want only the kept claim's", n)
	}
	if _, err := os.Stat(compactTemp(path)); err == nil {
		t.Errorf("%s left behind", compactTemp(path))
	}
	fi, _ := os.Stat(path)
	s, err = Open(path, Options{Rewrite: hide})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if fi2, _ := os.Stat(path); !os.SameFile(fi, fi2) {
		t.Error("a second Open rewrote and compacted a file with nothing to change")
	}
}

func withArgv(c Claim, argv []string) Claim {
	c.Argv = argv
	return c
}

// TestRewriteCompactionResumed: a daemon killed after a rewrite committed
// and before its compaction left the old argv in freed pages; the next
// Open, whose rewrite changes nothing, compacts all the same (and with no
// Rewrite at all), so the secret leaves the file. Before, it stayed for
// good.
func TestRewriteCompactionResumed(t *testing.T) {
	const secret = "hunter2-resumed-secret"
	hide := func(c *Claim) bool {
		changed := false
		for i, a := range c.Argv {
			if strings.Contains(a, secret) {
				c.Argv[i], changed = "[REDACTED]", true
			}
		}
		return changed
	}
	for _, next := range []struct {
		name string
		opts Options
	}{{"the same patterns", Options{Rewrite: hide}}, {"no patterns", Options{}}} {
		t.Run(next.name, func(t *testing.T) {
			s, path := openTemp(t, Options{})
			for i := range 20 {
				c := Claim{Kind: Job, Argv: []string{"db", "--password=" + secret + strings.Repeat("x", i)}}
				if err := s.Put(&c); err != nil {
					t.Fatal(err)
				}
			}
			// The rewrite's transaction, then the crash.
			if n, err := s.rewriteClaims(hide); err != nil || n != 20 {
				t.Fatalf("rewriteClaims = %d, %v; want 20 changed", n, err)
			}
			s.Close()
			if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(secret)) {
				t.Fatal("the secret is not in the file after the rewrite alone: the test proves nothing")
			}
			s, err := Open(path, next.opts)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(secret)) {
				t.Errorf("the secret is still in %s after the next start", path)
			}
			// The compacted file holds no mark: a third start leaves it.
			fi, _ := os.Stat(path)
			s, err = Open(path, next.opts)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			if fi2, _ := os.Stat(path); !os.SameFile(fi, fi2) {
				t.Errorf("a start after the compaction compacted again")
			}
		})
	}
}
