//go:build !linux

package userdb

import "os"

// fileID is what says a file changed: the file (os.SameFile), its size
// and modification time.
type fileID struct{ fi os.FileInfo }

func statPath(path string) (fileID, error) {
	fi, err := os.Stat(path)
	return fileID{fi}, err
}

func statFile(f *os.File) (fileID, error) {
	fi, err := f.Stat()
	return fileID{fi}, err
}

func (a fileID) same(b fileID) bool {
	return a.fi != nil && b.fi != nil && os.SameFile(a.fi, b.fi) &&
		a.fi.Size() == b.fi.Size() && a.fi.ModTime().Equal(b.fi.ModTime())
}
