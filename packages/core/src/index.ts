/**
 * @oncehook/core: the engine, everything the exactly-once guarantee rests on.
 *
 *   the edge's half     claim-batcher.ts (group commit of claims; one batch in claim-batch.ts,
 *                       the breaker in claim-circuit.ts), enqueue-relay.ts (the outbox)
 *   the worker's half   process-event.ts (the state machine), handler-context.ts + steps/ (fenced,
 *                       recorded steps), registry.ts, load-handlers.ts, event-worker.ts (the
 *                       queue consumer), retry-policy.ts (attempts, verdicts, delays),
 *                       flow-control.ts (concurrency, rate limits, priority, pauses),
 *                       lease-clock.ts + lease-keeper.ts (a call never outlives its lease)
 *   destinations        destinations/ (a destination is a handler whose one step is a
 *                       signed call to the team's service: forward.ts, destination-handler.ts)
 *   recovery            reconciler.ts (lost jobs, expired leases), retention-sweep.ts
 *   the store           store/ (every statement, by stage), migrate.ts + migrations/
 *   the queue           queue.ts (BullMQ on Redis, or postgres-queue.ts: a table of our own; job ids, shards)
 *   operators           operations.ts (list, show, re-drive, replay, pause, resume), payload-view.ts
 *   vocabulary          vocabulary.ts (states, rows, the queue's job, the glossary),
 *                       event-key.ts, lock-keys.ts, queue-names.ts
 *   assembly            engine.ts (createEngine: the one place the parts are put together)
 */
export * from './vocabulary.js';
export * from './event-key.js';
export * from './lock-keys.js';
export * from './queue-names.js';
export * from './claim-batcher.js';
export * from './enqueue-relay.js';
export * from './event-worker.js';
export * from './flow-control.js';
export * from './handler-context.js';
export * from './idempotency-key.js';
export * from './load-handlers.js';
export * from './migrate.js';
export * from './database-ready.js';
export * from './operations.js';
export * from './backfill.js';
export * from './backfill-scheduler.js';
export * from './payload-view.js';
export * from './process-event.js';
export * from './readiness.js';
export * from './queue.js';
export * from './postgres-queue.js';
export * from './reconciler.js';
export * from './failure-groups.js';
export * from './activity.js';
export * from './registry.js';
export * from './retention-sweep.js';
export * from './retry-policy.js';
export * from './store/queries.js';
export * from './engine.js';
// What the engine reports, and the worker's metrics as its listeners.
export * from './engine-events.js';
export * from './worker-metrics.js';
export * from './destinations/destination-config.js';
export * from './destinations/destination-handler.js';
export * from './destinations/forward.js';
export * from './destinations/destination-states.js';
