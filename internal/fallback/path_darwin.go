package fallback

// FoldPathCase is true on macOS: paths compare case-insensitively.
const FoldPathCase = true
