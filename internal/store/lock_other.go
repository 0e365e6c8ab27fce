//go:build !unix

package store

import (
	"errors"
	"os"
)

// tryLock is not implemented where flock is missing.
func tryLock(*os.File) (bool, error) {
	return false, errors.ErrUnsupported
}
