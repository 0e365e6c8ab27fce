package events

import "time"

// FlushEvery is how often a printer of an event stream (the CLI's events
// view) flushes what it buffered: often enough to read live, rarely enough
// that a storm is written in large blocks.
const FlushEvery = 100 * time.Millisecond
