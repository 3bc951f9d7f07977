package ctrlscope

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The typed push and pop keep container/heap's order: every pop is the least entry left (by
// deadline, then key), interleaved with pushes and after a heap.Init, as the findings use them.
func TestDueHeapTypedPushPopKeepHeapOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var typed, boxed dueHeap
	for step := 0; step < 20_000; step++ {
		if len(typed) == 0 || r.IntN(3) > 0 {
			e := dueEntry{deadline: float64(r.IntN(50)), since: float64(step), key: fmt.Sprintf("k%d", r.IntN(40))}
			typed.push(e)
			heap.Push(&boxed, e)
		} else {
			got, want := typed.pop(), heap.Pop(&boxed).(dueEntry)
			if got.deadline != want.deadline || got.key != want.key {
				t.Fatalf("step %d: pop gave %+v, container/heap %+v", step, got, want)
			}
		}
		if step == 10_000 { // findings.go compacts the heap and re-inits it
			heap.Init(&typed)
		}
	}
	for len(typed) > 0 {
		got, want := typed.pop(), heap.Pop(&boxed).(dueEntry)
		if got.deadline != want.deadline || got.key != want.key {
			t.Fatalf("drain: pop gave %+v, container/heap %+v", got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { typed.push(dueEntry{deadline: 1, key: "a"}); typed.pop() }); n != 0 {
		t.Fatalf("push and pop allocate %.0f times", n)
	}
}
