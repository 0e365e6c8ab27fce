package main

import (
	"context"
	"fmt"
)

func init() {
	register("output", "print a job's output (its stdout and stderr, kept by the daemon)", runOutput,
		`output ID [--offset N] [--socket PATH]

Prints the job's output from byte N (default 0) to its end as it is when the
command starts, in reads of at most 1 MiB. Bytes the daemon dropped (it keeps
the last job_output_max bytes of a job's output) are skipped, and stderr says
which. Only the claim's user and root
may read it. Exit codes: 0 printed, 64 bad arguments, 66 no such claim or no
output, 69 no daemon, 70 other errors.`)
}

func runOutput(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags("output")
	offset := fs.Int64("offset", 0, "the first byte to print")
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
	if err := c.CopyOutput(ctx, pos[0], *offset, env.stdout, dropped); err != nil {
		return apiFail(err)
	}
	return nil
}
