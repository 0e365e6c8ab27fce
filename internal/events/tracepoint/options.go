package tracepoint

// DefaultArgvMax is the argument bytes an exec event carries unless
// WithArgvMax says otherwise.
const DefaultArgvMax = 32 << 10

// MaxArgvMax bounds WithArgvMax: one argument may be 128 KiB
// (MAX_ARG_STRLEN) and all of them a quarter of the stack limit; 1 MiB
// covers nearly every exec while keeping the per-CPU scratch buffer small.
const MaxArgvMax = 1 << 20
