package ctrlruntime

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ctrlscope/ctrlscope/go/ctrlscope"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/clientgo"
)

// Reconciler wraps r so that each Reconcile of controller name publishes reconcile_start and a
// reconcile record: its duration, result (success, requeue, requeue_after, error, terminal for a
// reconcile.TerminalError, panic), requeue_after seconds and error text. The context r receives
// comes from Telemetry.ReconcileStart: API writes made with it (through a config from
// clientgo.WrapConfig) are published as this controller's writes.
//
// The result is classified the way controller-runtime's controller acts on it (an error wins over
// a Result; RequeueAfter over Requeue), so the record says what the queue does next.
//
// An error that is (or wraps) a *clientgo.ReadOnlyError -- a write the worker refused itself,
// clientgo.GuardWrites -- is returned as a reconcile.TerminalError: controller-runtime then neither
// requeues the key nor backs off, because no retry can succeed while the worker is read-only (it
// takes a restart with --allow-writes). The record says terminal, and the error text says why.
//
// A panic is published, then re-panicked with the same value, so controller-runtime's RecoverPanic
// (on by default: the panic becomes an error and a retry) or crash behaves as upstream; the stack
// trace upstream logs then starts at the re-panic, the panic value is the original.
//
// Workers: controller-runtime does not tell which of its MaxConcurrentReconciles goroutines runs a
// Reconcile, so the worker index is a slot: the lowest one free while the call runs. With N workers
// the indexes are 0..N-1 and a worker's calls that do not overlap another's keep its index.
func (i *Instrumentation) Reconciler(name string, r reconcile.Reconciler) reconcile.Reconciler {
	i.mu.Lock()
	info := i.controller(name)
	i.mu.Unlock()
	return &observedReconciler{i: i, name: name, inner: r, info: info, topic: i.tel.ControllerTopic(name)}
}

type observedReconciler struct {
	i     *Instrumentation
	name  string
	inner reconcile.Reconciler
	info  *controllerInfo // i.controller(name): its slots (i.mu)
	topic *ctrlscope.ControllerTopic
}

func (i *Instrumentation) takeSlot(controller string) int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return takeSlotLocked(i.controller(controller))
}

func takeSlotLocked(c *controllerInfo) int { // i.mu held
	for n, used := range c.slots {
		if !used {
			c.slots[n] = true
			return n
		}
	}
	c.slots = append(c.slots, true)
	return len(c.slots) - 1
}

func (i *Instrumentation) releaseSlot(controller string, n int) {
	i.mu.Lock()
	i.controller(controller).slots[n] = false
	i.mu.Unlock()
}

func (o *observedReconciler) takeSlot() int {
	o.i.mu.Lock()
	defer o.i.mu.Unlock()
	return takeSlotLocked(o.info)
}

func (o *observedReconciler) releaseSlot(n int) {
	o.i.mu.Lock()
	o.info.slots[n] = false
	o.i.mu.Unlock()
}

// terminalIfReadOnly wraps err as a reconcile.TerminalError when it is (or wraps) a
// *clientgo.ReadOnlyError and is not terminal already; other errors are returned as they are.
func terminalIfReadOnly(err error) error {
	var refused *clientgo.ReadOnlyError
	if err == nil || !errors.As(err, &refused) || errors.Is(err, reconcile.TerminalError(nil)) {
		return err
	}
	return reconcile.TerminalError(err)
}

// Classify is the ReconcileResult of a Reconcile that returned res, err.
func Classify(res reconcile.Result, err error) ctrlscope.ReconcileResult {
	switch {
	case err != nil && errors.Is(err, reconcile.TerminalError(nil)):
		return ctrlscope.ReconcileResultTerminal
	case err != nil:
		return ctrlscope.ReconcileResultError
	case res.RequeueAfter > 0:
		return ctrlscope.ReconcileResultRequeueAfter
	case res.Requeue: //nolint:staticcheck // deprecated upstream, still acted on
		return ctrlscope.ReconcileResultRequeue
	}
	return ctrlscope.ReconcileResultSuccess
}

func (o *observedReconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	tel, topic := o.i.tel, o.topic
	key := Key(req)
	worker := o.takeSlot()
	defer o.releaseSlot(worker)
	ctx = topic.ReconcileStart(ctx, key, worker)
	start := tel.Clock().Now()
	defer func() {
		if p := recover(); p != nil {
			topic.ReconcileEnd(key, worker, tel.Clock().Since(start), ctrlscope.ReconcileResultPanic, 0,
				fmt.Sprintf("panic: %v", p))
			panic(p)
		}
	}()
	res, err = o.inner.Reconcile(ctx, req)
	err = terminalIfReadOnly(err)
	result := Classify(res, err)
	errText := ""
	if err != nil {
		errText = err.Error()
	}
	requeueAfter := res.RequeueAfter
	if result != ctrlscope.ReconcileResultRequeueAfter {
		requeueAfter = 0
	}
	topic.ReconcileEnd(key, worker, tel.Clock().Since(start), result, requeueAfter, errText)
	return res, err
}
