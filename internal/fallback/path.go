package fallback

import (
	"path/filepath"
	"strings"
)

// SamePath reports whether two paths (a cwd, an executable) name the same
// file by text on this host: compared after filepath.Clean, and without case
// on macOS, whose default file systems are case-insensitive (FoldPathCase).
// It does not apply Unicode normalisation (APFS preserves but does not
// normalise, HFS+ stores NFD), nor resolve symbolic links.
func SamePath(a, b string) bool { return pathsEqual(a, b, FoldPathCase) }

// pathsEqual compares two paths after cleaning, case-insensitively (Unicode
// simple folding) when fold is set.
func pathsEqual(a, b string, fold bool) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	if fold {
		return strings.EqualFold(a, b)
	}
	return a == b
}
