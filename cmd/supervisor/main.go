// Command supervisor knows, with proof, which processes on a host are its
// own. See README.md for the commands and their exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
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

func register(c *command) { commands[c.name] = c }

func main() {
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
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'supervisor COMMAND --help' for a command's flags and exit codes.")
}

func commandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: supervisor %s\n\n%s\n", c.usage, c.summary)
}

// parse parses flags that may come before, between or after positional
// arguments, and returns the positional ones. A "--" ends flag parsing.
func parse(fs *flag.FlagSet, c *command, env *cliEnv, args []string) ([]string, error) {
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
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse consumed a "--" if it saw one: everything after is
		// positional. Otherwise rest[0] is the first positional argument.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func newFlags(name string) *flag.FlagSet {
	return flag.NewFlagSet(name, flag.ContinueOnError)
}

func init() {
	register(&command{
		name:    "version",
		summary: "print the version",
		usage:   "version",
		run: func(ctx context.Context, env *cliEnv, args []string) error {
			fs := newFlags("version")
			if _, err := parse(fs, commands["version"], env, args); err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "supervisor %s\n", strings.TrimSpace(version))
			return nil
		},
	})
}
