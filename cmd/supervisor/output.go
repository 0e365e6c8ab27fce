package main

import (
	"context"

	"github.com/procsupervisor/supervisor/internal/api"
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
	// The end is the size at the first read: a job still writing does not
	// keep the command going.
	end := int64(-1)
	for off := *offset; ; {
		o, err := c.Output(ctx, pos[0], off, api.MaxOutputRead)
		if err != nil {
			return apiFail(err)
		}
		if end < 0 {
			end = o.Size
		}
		if _, err := env.stdout.Write(o.Data); err != nil {
			return fail(exitSoftware, "%v", err)
		}
		off += int64(len(o.Data))
		if len(o.Data) == 0 || off >= end {
			return nil
		}
	}
}
