package ctrlruntime

import (
	"testing"

	"github.com/ctrlscope/ctrlscope/go/internal/testredis"
	"github.com/ctrlscope/ctrlscope/go/internal/testtel"
)

// newHarness runs on a fake clock; newRealHarness on the real one, for controller-runtime's
// priority queue, which keeps its own time (time.Now) and cannot be given a fake clock.
func newHarness(t *testing.T) *testtel.Harness { return testtel.New(t, testtel.Options{}) }

func newRealHarness(t *testing.T) *testtel.Harness {
	return testtel.New(t, testtel.Options{RealClock: true})
}

var waitFor = testredis.WaitFor
