package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/token"
)

// InstalledConfig is where the packages install the daemon's config file
// (packaging/nfpm.yaml); the service runs the daemon with it.
const InstalledConfig = "/etc/procsupervisor/procsupervisor.conf"

// TreeCmdline gives `supervisor tree` the command lines of a tree that
// mech produced. The daemon's tree ("daemon") needs none: its nodes carry
// their command lines, redacted by the daemon's patterns, and the client
// must not read /proc around them. A local tree gets each process's
// command line redacted by the redact_args of the installed config file;
// without that file, unredacted. A config file that exists but cannot be
// read or parsed gives no command lines at all: patterns this user cannot
// read are not bypassed by printing what they would hide.
func TreeCmdline(mech string) func(pid int32, tok token.Token) string {
	return treeCmdline(mech, InstalledConfig, local.Argv)
}

func treeCmdline(mech, config string, argv func(int32, token.Token) ([]string, bool)) func(int32, token.Token) string {
	if mech == "daemon" {
		return nil
	}
	rules, err := configRedaction(config)
	if err != nil {
		return nil
	}
	return func(pid int32, tok token.Token) string {
		args, cut := argv(pid, tok)
		redact := rules.Argv
		if cut {
			redact = rules.ArgvCut // the last argument may start a secret
		}
		a, _ := redact(args)
		return strings.Join(a, " ")
	}
}

// InstalledRedaction returns the redact_args patterns of the installed
// config file, for a command that prints what a local mechanism saw
// (`supervisor events`): none (nil) without the file. A file that exists
// but cannot be read or parsed is an error: printing everything would
// bypass patterns this user cannot read.
func InstalledRedaction() (*redact.Rules, error) { return configRedaction(InstalledConfig) }

func configRedaction(config string) (*redact.Rules, error) {
	cfg := DefaultConfig()
	err := LoadFile(config, &cfg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	rules, err := redact.Parse(cfg.RedactArgs)
	if err != nil {
		return nil, fmt.Errorf("%s: redact_args: %w", config, err)
	}
	return rules, nil
}
