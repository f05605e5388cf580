/**
 * @oncehook/core: the engine, everything the exactly-once guarantee rests on.
 *
 *   the edge's half     claim-batcher.ts (group commit of claims), enqueue-relay.ts (the outbox)
 *   the worker's half   process-event.ts (the state machine), handler-context.ts (fenced,
 *                       recorded steps), registry.ts, load-handlers.ts, event-worker.ts (the
 *                       queue consumer), retry-policy.ts (attempts, verdicts, delays)
 *   recovery            reconciler.ts (lost jobs, expired leases), retention-sweep.ts
 *   the store           store/ (every statement, by stage), migrate.ts + migrations/
 *   the queue           queue.ts (BullMQ on Redis or on Postgres, job ids, shards)
 *   operators           operations.ts (list, show, re-drive, replay), payload-view.ts
 *   assembly            engine.ts (createEngine: the one place the parts are put together)
 */
export * from './claim-batcher';
export * from './enqueue-relay';
export * from './event-worker';
export * from './handler-context';
export * from './idempotency-key';
export * from './load-handlers';
export * from './migrate';
export * from './operations';
export * from './payload-view';
export * from './process-event';
export * from './queue';
export * from './reconciler';
export * from './registry';
export * from './retention-sweep';
export * from './retry-policy';
export * from './store/queries';
export * from './engine';
