/**
 * The worker's run metrics, as listeners of the engine's events (engine-events.ts): each
 * attempt's outcome and duration, runs that wait, events no handler takes, dispatch batch
 * sizes, and what a reconciler pass took back and opened. The gauges a pass reads from the
 * database (reconciler.ts refreshGauges) are not events and stay there.
 */
import { createTypeLabeler, sourceFields, type TypeLabeler, type WorkerMetrics } from '@oncehook/shared';
import type { EngineEvents } from './engine-events.js';
import type { HandlerRegistry } from './registry.js';

/**
 * The `type` label of a run's metrics: the type as its handler names it (createTypeLabeler),
 * else `other` (a destination taking `*` or a glob). A run exists only for a handler the
 * registry matched, so a type that is the handler's event name plus an action was matched as
 * GitHub's (registry.ts typeMatches): labelled with the event name.
 */
function runTypeLabels(registry: HandlerRegistry): (handler: string, type: string) => string {
  const byHandler = new Map<string, TypeLabeler>();
  return (handler, type) => {
    let label = byHandler.get(handler);
    if (!label) {
      const found = registry.byName(handler);
      label = createTypeLabeler(found ? [found] : []);
      byHandler.set(handler, label);
    }
    return label('github', type);
  };
}

/** Subscribes `metrics` to `events`; returns the function that unsubscribes them all. */
export function subscribeWorkerMetrics(events: EngineEvents, metrics: WorkerMetrics, registry: HandlerRegistry): () => void {
  const runType = runTypeLabels(registry);
  // The unhandled counter's `type`: a type some loaded handler or destination names (for
  // another source) keeps its name, anything else is `other`.
  const unhandledType = createTypeLabeler(registry.all());
  const stops = [
    events.on('run:ended', (run) => {
      // mutant: worker-type-label-unbounded
      const labels = { ...sourceFields(run.source), type: runType(run.handler, run.type), handler: run.handler, outcome: run.outcome };
      metrics.processingDuration.observe(labels, run.seconds);
      metrics.processedTotal.inc(labels);
    }),
    events.on('run:waiting', (run) => metrics.runsDelayedTotal.inc({ handler: run.handler, reason: run.reason })),
    events.on('event:unhandled', ({ source, type }) => metrics.unhandledTotal.inc({ ...sourceFields(source), type: unhandledType('', type) })),
    events.on('dispatch:batch', ({ events: size }) => metrics.dispatchBatchSize.observe(size)),
    events.on('runs:batch', ({ statement, runs }) => metrics.runBatchSize.observe({ statement }, runs)),
    events.on('reconciler:led', (pass) => {
      metrics.recoveriesTotal.inc({ kind: 'reclaimed' }, pass.reclaimed);
      metrics.recoveriesTotal.inc({ kind: 'requeued' }, pass.requeued);
      for (const g of pass.opened) metrics.failureGroupsOpened.inc({ handler: g.handler });
    }),
  ];
  return () => {
    for (const stop of stops) stop();
  };
}
