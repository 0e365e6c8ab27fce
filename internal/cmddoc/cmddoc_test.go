package cmddoc

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name     string
		args     []string
		program  bool
		min, max int
		wantPos  []string
		wantJSON bool
		wantErr  string
	}{
		{"flags anywhere", []string{"1", "--json", "2"}, false, 2, 2, []string{"1", "2"}, true, ""},
		{"-- ends flags", []string{"1", "--", "--json"}, false, 2, 2, []string{"1", "--json"}, false, ""},
		{"program: flags end at it", []string{"--json", "ls", "-la", "--json"}, true, 1, -1, []string{"ls", "-la", "--json"}, true, ""},
		{"program after --", []string{"--json", "--", "ls", "-la"}, true, 1, -1, []string{"ls", "-la"}, true, ""},
		{"program with a flag named like ours", []string{"sh", "-c", "--json"}, true, 1, -1, []string{"sh", "-c", "--json"}, false, ""},
		{"too few", []string{"1"}, false, 2, 2, nil, false, "want PID TOKEN, got 1 arguments"},
		{"unexpected", []string{"x"}, false, 0, 0, nil, false, `unexpected arguments ["x"]`},
		{"unknown flag", []string{"--bogus"}, false, 0, 0, nil, false, "flag provided but not defined: -bogus"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		asJSON := fs.Bool("json", false, "")
		want := ""
		if c.min == 2 {
			want = "PID TOKEN"
		}
		pos, err := Parse(fs, c.args, c.program, c.min, c.max, want)
		switch {
		case c.wantErr != "":
			if err == nil || err.Error() != c.wantErr {
				t.Errorf("%s: Parse(%q) error = %v, want %q", c.name, c.args, err, c.wantErr)
			}
		case err != nil || !slices.Equal(pos, c.wantPos) || *asJSON != c.wantJSON:
			t.Errorf("%s: Parse(%q) = %q, json %v, %v; want %q, json %v", c.name, c.args, pos, *asJSON, err, c.wantPos, c.wantJSON)
		}
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	if _, err := Parse(fs, []string{"--help"}, false, 0, 0, ""); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("Parse(--help) = %v, want flag.ErrHelp", err)
	}
}

// testCommands is a registry of two commands, one with every kind of flag.
func testCommands() []Command {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.Bool("json", false, "print one JSON `object`")
	fs.String("mechanism", "auto", "event mechanism: auto|ebpf|netlink|proc|ps")
	fs.String("socket", "", "the daemon's `PATH`")
	fs.Duration("grace", 5*time.Second, "grace period")
	fs.Bool("a", false, "all of them")
	return []Command{
		{Name: "completion", Summary: "print a completion script", Usage: "completion bash|zsh|fish\n\nPrints it."},
		{Name: "verify", Summary: "judge a claim: OWNED or [not]", Usage: "verify PID TOKEN [--json]\n\nPrints the verdict.\n\n    supervisor verify 1 v1:t:...\n\n.Not a request, a backslash \\ and -dashes.", Flags: Flags(fs)},
	}
}

func TestFlags(t *testing.T) {
	fl := testCommands()[1].Flags
	got := map[string]Flag{}
	for _, f := range fl {
		got[f.Name] = f
	}
	if f := got["json"]; f.Arg != "" {
		t.Errorf("a boolean flag takes an argument: %+v", f)
	}
	if f := got["mechanism"]; !slices.Equal(f.Values, []string{"auto", "ebpf", "netlink", "proc", "ps"}) || f.Arg != "string" || f.Default != "auto" {
		t.Errorf("mechanism = %+v, want its five values, arg string, default auto", f)
	}
	if f := got["socket"]; f.Arg != "PATH" || f.Values != nil {
		t.Errorf("socket = %+v, want arg PATH and no values", f)
	}
	if f := got["grace"]; f.Arg != "duration" || f.Default != "5s" {
		t.Errorf("grace = %+v", f)
	}
}

// complete runs a bash completion script for the words typed so far (the
// last is the one being completed) and returns what it offers.
func bashComplete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	prog := script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" + itoa(len(words)-1) +
		"\n_supervisor\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	out, err := exec.Command("bash", "--norc", "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

func itoa(n int) string { return string(rune('0' + n)) }

func TestBash(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		testenv.Skip(t, "no bash (.ci/run installs it)")
	}
	var b strings.Builder
	if err := Completion(&b, "bash", "supervisor", testCommands()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"supervisor", ""}, []string{"completion", "verify", "help"}},
		{[]string{"supervisor", "ver"}, []string{"verify"}},
		{[]string{"supervisor", "verify", "--"}, []string{"--grace", "--json", "--mechanism", "--socket"}},
		{[]string{"supervisor", "verify", "--me"}, []string{"--mechanism"}},
		{[]string{"supervisor", "verify", "-"}, []string{"-a", "--grace", "--json", "--mechanism", "--socket"}},
		{[]string{"supervisor", "verify", "--mechanism", "n"}, []string{"netlink"}},
		{[]string{"supervisor", "completion", "z"}, []string{"zsh"}},
		{[]string{"supervisor", "help", "c"}, []string{"completion"}},
		{[]string{"supervisor", "verify", "12"}, nil}, // left to the shell's default
	} {
		if got := bashComplete(t, b.String(), c.words...); !slices.Equal(got, c.want) {
			t.Errorf("bash completion of %q = %q, want %q", c.words, got, c.want)
		}
	}
}

func TestFish(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		testenv.Skip(t, "no fish (.ci/run installs it)")
	}
	path := filepath.Join(t.TempDir(), "supervisor.fish")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Fish(f, "supervisor", testCommands()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		line string
		want []string
	}{
		{"supervisor ver", []string{"verify"}},
		{"supervisor verify --me", []string{"--mechanism"}},
		{"supervisor verify --mechanism e", []string{"ebpf"}},
		{"supervisor verify -", []string{"-a", "--grace", "--json", "--mechanism", "--socket"}},
		{"supervisor completion ", []string{"bash", "fish", "zsh"}}, // fish sorts
	} {
		out, err := exec.Command("fish", "--no-config", "-c", "source "+path+"; complete -C '"+c.line+"'").CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			w, _, _ := strings.Cut(l, "\t")
			if w != "" {
				got = append(got, w)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("fish completion of %q = %q, want %q", c.line, got, c.want)
		}
	}
}

// TestZsh loads the script into zsh's completion system, which checks
// its syntax and its compdef registration.
func TestZsh(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		testenv.Skip(t, "no zsh (.ci/run installs it)")
	}
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "_supervisor"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Zsh(f, "supervisor", testCommands()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	prog := "autoload -U compinit && compinit -u -D && source " + filepath.Join(dir, "_supervisor") + " && print -r -- $_comps[supervisor]"
	out, err := exec.Command("zsh", "-f", "-c", prog).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "_supervisor" {
		t.Errorf("zsh: %v, %q; want the completion registered as _supervisor", err, out)
	}
	if out, err := exec.Command("zsh", "-n", filepath.Join(dir, "_supervisor")).CombinedOutput(); err != nil {
		t.Errorf("zsh -n: %v\n%s", err, out)
	}
}

func TestUnknownShell(t *testing.T) {
	var b strings.Builder
	if err := Completion(&b, "tcsh", "supervisor", testCommands()); !errors.Is(err, ErrShell) || b.Len() != 0 {
		t.Errorf("Completion(tcsh) = %v, wrote %q; want ErrShell and nothing", err, b.String())
	}
}

// TestMan renders a page that groff reads without a warning, with roff's
// special characters escaped.
func TestMan(t *testing.T) {
	var b strings.Builder
	if err := Man(&b, Supervisor, testCommands()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		".TH SUPERVISOR 1 ",
		".SS \"supervisor verify PID TOKEN [\\-\\-json]\"\n",
		"\\&.Not a request, a backslash \\e and \\-dashes.\n",
		".TP\n\\fB\\-\\-mechanism\\fR \\fIstring\\fR\nevent mechanism: auto|ebpf|netlink|proc|ps (default auto)\n",
		".TP\n\\fB\\-\\-json\\fR\n",
		".TP\n\\fB\\-a\\fR\nall of them\n",
		".nf\n.RS 4\nsupervisor verify 1 v1:t:...\n.RE\n.fi\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("man page lacks %q:\n%s", want, page)
		}
	}
	if _, err := exec.LookPath("groff"); err != nil {
		testenv.Skip(t, "no groff (.ci/run installs it)")
	}
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = strings.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("groff: %v\n%s", err, out)
	}
}
