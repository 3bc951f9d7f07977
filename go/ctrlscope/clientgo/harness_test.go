package clientgo

import (
	"testing"

	"github.com/ctrlscope/ctrlscope/go/internal/testredis"
	"github.com/ctrlscope/ctrlscope/go/internal/testtel"
)

func newHarness(t *testing.T) *testtel.Harness { return testtel.New(t, testtel.Options{}) }

var waitFor = testredis.WaitFor
