//go:build !noctrlscope

package main

// Modes ctrlscope and ctrlscope+events: the controller as ctrlscope's package ctrlruntime
// instruments it, publishing to a real Redis under a throwaway prefix (deleted afterwards):
// Instrument on the manager (its metrics sampler runs), ControllerOptions (the NewQueue wrapper
// around controller-runtime's priority queue) and the Reconciler wrapper; ctrlscope+events also
// wraps the event handler (an event record per watch event, with the requests it enqueued).

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/ctrlscope/ctrlscope/go/bench/internal/benchkit"
	"github.com/ctrlscope/ctrlscope/go/ctrlscope/ctrlruntime"
)

func init() {
	modes["ctrlscope"] = func(mgr manager.Manager, s *setup, f benchkit.Flags) error {
		return instrumented(mgr, s, f, false)
	}
	modes["ctrlscope+events"] = func(mgr manager.Manager, s *setup, f benchkit.Flags) error {
		return instrumented(mgr, s, f, true)
	}
}

func instrumented(mgr manager.Manager, s *setup, f benchkit.Flags, events bool) error {
	t, err := benchkit.NewTelemetry(*f.RedisURL, "gobench-reconcile")
	if err != nil {
		return err
	}
	inst, err := ctrlruntime.Instrument(mgr, t.Tel, ctrlruntime.Options{})
	if err != nil {
		return err
	}
	s.opts = inst.ControllerOptions(controllerName, s.opts)
	s.opts.Reconciler = inst.Reconciler(controllerName, s.opts.Reconciler)
	if events {
		s.handler = inst.Handler(controllerName, s.handler)
	}
	s.finish = t.Close
	return nil
}
