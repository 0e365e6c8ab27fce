// Command supervisor knows, with proof, which processes on a host are its
// own. See README.md for the commands and their exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/procsupervisor/supervisor/internal/buildinfo"
	"github.com/procsupervisor/supervisor/internal/cmddoc"
	"github.com/procsupervisor/supervisor/internal/spawn"
	"github.com/procsupervisor/supervisor/internal/view"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name    string
	summary string
	usage   string
	run     func(ctx context.Context, env *cliEnv, args []string) error
	argv    bool // its flags end at the first argument (a program's own follow)
}

// cliEnv is what commands write to; tests substitute buffers.
type cliEnv struct {
	stdout, stderr io.Writer
	onHelp         func(*flag.FlagSet) // sees the flags --help stops at (registry)
}

var commands = map[string]*command{}

// register adds a command; usage is its synopsis, then what it does, its
// flags' meaning and its exit codes.
func register(name, summary string, run func(context.Context, *cliEnv, []string) error, usage string) {
	commands[name] = &command{name: name, summary: summary, usage: usage, run: run}
}

// startParent is this command's parent as it was when the process
// started, read before anything else: --bind-to-caller binds to it, and
// only while it still is the parent.
var startParent = int32(os.Getppid())

func main() {
	spawn.Main() // the daemon's workload shim never gets past this
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, &cliEnv{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

func runMain(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		usage(env.stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				commandUsage(env.stdout, c)
				return exitOK
			}
		}
		usage(env.stdout)
		return exitOK
	case "--version", "-version":
		args[0] = "version"
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.stderr, "supervisor: unknown command %q\n\n", args[0])
		usage(env.stderr)
		return exitUsage
	}
	err := c.run(ctx, env, args[1:])
	if err == nil {
		return exitOK
	}
	var s silentExit
	if errors.As(err, &s) {
		return int(s)
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	fmt.Fprintf(env.stderr, "supervisor %s: %v\n", c.name, err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitSoftware
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: supervisor COMMAND [ARGS]\n\ncommands:")
	for _, n := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'supervisor COMMAND --help' for a command's flags and exit codes.")
}

func commandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: supervisor %s\n\n%s\n", c.usage, c.summary)
}

// newFlags returns the flag set of a command; parse finds the command by
// the set's name.
func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet(name, flag.ContinueOnError)
}

// parse parses a command's flags and returns its positional arguments, min
// to max of them (max < 0: any number; see cmddoc.Parse).
func parse(env *cliEnv, fs *flag.FlagSet, args []string, min, max int, want string) ([]string, error) {
	c := commands[fs.Name()]
	pos, err := cmddoc.Parse(fs, args, c.argv, min, max, want)
	if errors.Is(err, flag.ErrHelp) {
		if env.onHelp != nil {
			env.onHelp(fs)
		}
		commandUsage(env.stdout, c)
		fs.SetOutput(env.stdout)
		fs.PrintDefaults()
	} else if err != nil {
		return nil, fail(exitUsage, "%v (see 'supervisor %s --help')", err, c.name)
	}
	return pos, err
}

// show prints v as indented JSON when asJSON is set, otherwise as text
// writes it.
func show(env *cliEnv, asJSON bool, v any, text func(w io.Writer)) error {
	return view.Print(env.stdout, asJSON, v, text)
}

// printJSON prints v as JSON, on one line when indent is "".
func printJSON(env *cliEnv, v any, indent string) error { return view.JSON(env.stdout, v, indent) }

// registry describes every command and its flags, as --help finds them.
func registry() []cmddoc.Command {
	var out []cmddoc.Command
	for _, n := range slices.Sorted(maps.Keys(commands)) {
		c, env := commands[n], &cliEnv{stdout: io.Discard, stderr: io.Discard}
		env.onHelp = func(fs *flag.FlagSet) {
			out = append(out, cmddoc.Command{Name: n, Summary: c.summary, Usage: c.usage, Flags: cmddoc.Flags(fs)})
		}
		_ = c.run(context.Background(), env, []string{"--help"})
	}
	return out
}

func init() {
	register("version", "print the version, commit, Go version and eBPF object hash", func(ctx context.Context, env *cliEnv, args []string) error {
		fs := newFlags("version")
		asJSON := fs.Bool("json", false, "print them as one JSON object")
		if _, err := parse(env, fs, args, 0, 0, ""); err != nil {
			return err
		}
		i := buildinfo.Read(strings.TrimSpace(version))
		return show(env, *asJSON, i, func(w io.Writer) { view.Version(w, i) })
	}, "version [--json]")
	register("completion", "print a completion script for bash, zsh or fish", func(ctx context.Context, env *cliEnv, args []string) error {
		pos, err := parse(env, newFlags("completion"), args, 1, 1, "bash, zsh or fish")
		if err == nil && cmddoc.Completion(env.stdout, pos[0], "supervisor", registry()) != nil {
			err = fail(exitUsage, "%q: want bash, zsh or fish", pos[0])
		}
		return err
	}, "completion bash|zsh|fish\n\nPrints the script; load it with source <(supervisor completion bash), or\ninstall it where the shell looks (bash-completion's completions/supervisor,\nzsh's $fpath as _supervisor, fish's completions/supervisor.fish).")
}
