//go:build !linux

package logfeed

import (
	"errors"
	"os"
)

func canReserve(*os.File) bool { return false }

func reserve(*os.File, int64, int64) error { return errors.ErrUnsupported }
