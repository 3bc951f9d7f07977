// Package ctrlscope publishes a Go controller's telemetry to the ctrlscope dashboard, in the
// language-neutral telemetry protocol v1 (protocol/README.md and protocol/redis-layout.md in the
// ctrlscope repository).
//
// Three layers, each usable on its own:
//
//   - Publisher batches records and state changes into frames, one frame per topic per flush
//     (20 ms), and appends them to Redis with the protocol's script (frame.lua, the very file every
//     publisher runs). It never blocks the caller: records wait in a bounded buffer, the oldest are
//     dropped and counted when Redis is away, state is kept in a mirror and rewritten with a reset
//     frame after Redis lost its data. Each run keeps a presence entry (who publishes what, and
//     whether it still runs) and gives its topics' keys the retention as TTL (CTRLSCOPE_RETENTION,
//     presence.go), so the keys of a worker gone for good expire by themselves.
//   - Telemetry turns observations (a watch event, a queue operation, a Reconcile's start and end)
//     into the protocol's records and topic state, exactly as ctrlscope's Python runtime does: the
//     same test vectors (protocol/vectors) fix both.
//   - The instrumentation packages observe real client-go and controller-runtime objects through
//     Telemetry: package clientgo (informers, event handlers, workqueues, the REST transport) and
//     package ctrlruntime (a manager's controllers, reconcilers, leader election and metrics).
//
// Only compact summaries of objects are published (resourceVersion, generation, uid, deletion,
// phase): the data of a Secret never leaves the process.
package ctrlscope
