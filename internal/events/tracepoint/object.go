//go:build (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm) && linux

package tracepoint

import (
	"crypto/sha256"
	"encoding/hex"
)

// ObjectSHA256 returns the SHA-256 of the embedded eBPF object
// (process_bpfel.o), in hex: which programs this binary loads.
func ObjectSHA256() string {
	sum := sha256.Sum256(_ProcessBytes)
	return hex.EncodeToString(sum[:])
}
