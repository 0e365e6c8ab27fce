package cmddoc

import (
	"flag"
	"fmt"
	"io"
)

// Parse parses fs's flags from args and returns the positional arguments,
// min to max of them (max < 0: any number); want names them in the error
// ("" for none). Flags may come before, between and after positional
// arguments, unless program is set: then flags end at the first positional
// argument, which starts a program's own argv (`launch ls -la`). A "--"
// ends flags either way. -h or --help return flag.ErrHelp; fs writes
// nothing (its output is discarded).
func Parse(fs *flag.FlagSet, args []string, program bool, min, max int, want string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		// fs.Parse consumed a "--" if it saw one: everything after is
		// positional. Otherwise rest[0] is the first positional argument.
		if len(rest) == 0 || program || (len(args) > len(rest) && args[len(args)-len(rest)-1] == "--") {
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
		return nil, fmt.Errorf("unexpected arguments %q", pos)
	}
	return nil, fmt.Errorf("want %s, got %d arguments", want, len(pos))
}
