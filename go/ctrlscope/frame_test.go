package ctrlscope

import (
	"os"
	"testing"
)

// The Go module embeds its own copy of protocol/frame.lua (go:embed cannot reach outside the
// module); every publisher must run that very file, so the copy must be byte-identical.
func TestFrameScriptIsTheProtocols(t *testing.T) {
	want, err := os.ReadFile("../../protocol/frame.lua")
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != frameLua {
		t.Fatal("go/ctrlscope/frame.lua differs from protocol/frame.lua: copy it again (cp protocol/frame.lua go/ctrlscope/)")
	}
}
