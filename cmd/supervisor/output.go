package main

import (
	"context"
	"fmt"

	"github.com/procsupervisor/supervisor/internal/view"
)

func init() {
	register("output", "print a job's output (its stdout and stderr, kept by the daemon)", runOutput,
		`output ID [--offset N] [--raw] [--socket PATH]

Prints the job's output from byte N (default 0) to its end as it is when the
command starts, in reads of at most 1 MiB. Bytes the daemon dropped (it keeps
the last job_output_max bytes of a job's output) are skipped, and stderr says
which. When stdout is a terminal, control characters other than newline and
tab are shown, not sent to the terminal: each C0 control byte and DEL as
\xNN (ESC as \x1b), each C1 control in UTF-8 as its two bytes (\xc2\x9b),
each bidirectional control and line or paragraph separator as its bytes,
and each byte that is not UTF-8 as \xNN, so that a job's escape sequences
(colours, titles, OSC 52 clipboard writes) do not act on the reader's
terminal; --raw writes them as they are. To a
pipe or a file the bytes are written as they are. Only the claim's user and
root may read it. Exit codes: 0 printed, 64 bad arguments, 66 no such claim
or no output, 69 no daemon, 70 other errors.`)
}

func runOutput(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("output")
	offset := fs.Int64("offset", 0, "the first byte to print")
	raw := fs.Bool("raw", false, "write control characters to a terminal as they are, not as \\xNN")
	sock := socketFlag(fs)
	pos, err := parse(env, fs, args, 1, 1, "ID")
	if err != nil {
		return err
	}
	if *offset < 0 {
		return fail(exitUsage, "--offset %d: must not be negative", *offset)
	}
	c := dial(*sock)
	defer c.Close()
	dropped := func(from, to int64) {
		fmt.Fprintf(env.stderr, "supervisor output: bytes %d to %d were dropped: the daemon keeps the last job_output_max bytes of a job's output\n", from, to)
	}
	out := env.stdout
	if !*raw && view.Terminal(env.stdout) {
		esc := view.NewControlWriter(env.stdout)
		defer esc.Flush()
		out = esc
	}
	if err := c.CopyOutput(ctx, pos[0], *offset, out, dropped); err != nil {
		return apiFail(err)
	}
	return nil
}
