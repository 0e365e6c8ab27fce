//go:build !linux

package daemon

import (
	"fmt"
	"os"
)

// openConfig opens the config file path and checks it with
// checkConfigFile only: the directory checks of the Linux build
// (configfile_linux.go) are not made here, where the daemon does not run.
func openConfig(path string, euid int) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := checkConfigFile(f, euid); err != nil {
		f.Close()
		return nil, fmt.Errorf("config %s: %v: %w: %w", path, err, ErrUnsafeConfig, ErrConfig)
	}
	return f, nil
}

// checkPaths checks nothing: Run, whose directories it checks on Linux,
// does not run here.
func (c *Config) checkPaths(euid int) error { return nil }
