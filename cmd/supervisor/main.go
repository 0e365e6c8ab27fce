// Command supervisor knows, with proof, which processes on a host are its
// own. See README.md for the commands and their exit codes.
package main

import (
	"context"
	"encoding/json"
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

	"github.com/procsupervisor/supervisor/internal/spawn"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name    string
	summary string
	usage   string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv is what commands write to; tests substitute buffers.
type cliEnv struct {
	stdout, stderr io.Writer
}

var commands = map[string]*command{}

// register adds a command; usage is its synopsis, then what it does, its
// flags' meaning and its exit codes.
func register(name, summary string, run func(context.Context, *cliEnv, []string) error, usage string) {
	commands[name] = &command{name: name, summary: summary, usage: usage, run: run}
}

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

// parse parses flags that may come before, between or after positional
// arguments, and returns the positional ones, min to max of them (max < 0:
// any number); want names them in the error ("" for none). A "--" ends
// flag parsing.
func parse(env *cliEnv, fs *flag.FlagSet, args []string, min, max int, want string) ([]string, error) {
	c := commands[fs.Name()]
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				commandUsage(env.stdout, c)
				fs.SetOutput(env.stdout)
				fs.PrintDefaults()
				return nil, flag.ErrHelp
			}
			return nil, fail(exitUsage, "%v (see 'supervisor %s --help')", err, c.name)
		}
		rest := fs.Args()
		// fs.Parse consumed a "--" if it saw one: everything after is
		// positional. Otherwise rest[0] is the first positional argument.
		if len(rest) == 0 || (len(args) > len(rest) && args[len(args)-len(rest)-1] == "--") {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) >= min && (max < 0 || len(pos) <= max):
		return pos, nil
	case want == "":
		return nil, fail(exitUsage, "unexpected arguments %q", pos)
	}
	return nil, fail(exitUsage, "want %s, got %d arguments", want, len(pos))
}

// show prints v as indented JSON when asJSON is set, otherwise as text
// writes it.
func show(env *cliEnv, asJSON bool, v any, text func(w io.Writer)) error {
	if !asJSON {
		text(env.stdout)
		return nil
	}
	return printJSON(env, v, "  ")
}

// printJSON prints v as JSON, on one line when indent is "".
func printJSON(env *cliEnv, v any, indent string) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return fail(exitSoftware, "%v", err)
	}
	return nil
}

func init() {
	register("version", "print the version", func(ctx context.Context, env *cliEnv, args []string) error {
		if _, err := parse(env, newFlags("version"), args, 0, -1, ""); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "supervisor %s\n", strings.TrimSpace(version))
		return nil
	}, "version")
}
