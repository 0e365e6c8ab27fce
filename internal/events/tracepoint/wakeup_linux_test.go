//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import "testing"

// TestSetWakeup checks that the programs wake a polling reader at half the
// ring as New sizes it, with and without the exec context and whatever the
// argv bound.
func TestSetWakeup(t *testing.T) {
	tests := []struct {
		name     string
		context  bool
		argvMax  int
		wantRing uint32
	}{
		{"no context", false, 0, 1 << 20},
		{"context, no argv", true, 0, contextRingMin},
		{"context, default argv", true, DefaultArgvMax, contextRingMin},
		{"context, largest argv", true, MaxArgvMax, 32 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := loadProcess()
			if err != nil {
				t.Fatal(err)
			}
			if tt.context {
				if err := setContext(spec, tt.argvMax); err != nil {
					t.Fatal(err)
				}
			}
			if err := setWakeup(spec); err != nil {
				t.Fatal(err)
			}
			var got uint32
			if err := spec.Variables[processVarWakeupBytes].Get(&got); err != nil {
				t.Fatal(err)
			}
			ring := spec.Maps[processMapEvents].MaxEntries
			if ring != tt.wantRing || got != ring/2 {
				t.Fatalf("ring %d bytes, wakeup_bytes %d; want %d and %d", ring, got, tt.wantRing, tt.wantRing/2)
			}
		})
	}
}
