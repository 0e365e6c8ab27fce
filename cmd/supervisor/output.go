package main

import (
	"context"
)

func init() {
	register("output", "print a job's output (its stdout and stderr, kept by the daemon)", runOutput,
		`output ID [--offset N] [--socket PATH]

Prints the job's output from byte N (default 0) to its end as it is when the
command starts, in reads of at most 1 MiB. Only the claim's user and root
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
	if err := c.CopyOutput(ctx, pos[0], *offset, env.stdout); err != nil {
		return apiFail(err)
	}
	return nil
}
