//go:build !darwin

package fallback

// FoldPathCase is false: paths compare byte for byte after cleaning.
const FoldPathCase = false
