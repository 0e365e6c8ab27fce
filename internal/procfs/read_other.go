//go:build !linux

package procfs

import (
	"errors"
	"os"
)

func readFile(path []byte, buf []byte) (int, error) {
	f, err := os.Open(string(path))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.Read(buf)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	return n, err
}
