/**
 * The engine's one observation surface: what happened to runs, steps, events and reconciler
 * passes, as typed events. Metrics, the run log lines, the failure notifier and test probes
 * subscribe here instead of being called from inside the state machine (graphile-worker's
 * `events` emitter is the model). Tracing is not a listener: its spans wrap the run.
 *
 *   const stop = engine.events.on('run:ended', (run) => metrics.processedTotal.inc({ ... }));
 *
 * A listener observes; it never changes a run. An error it throws (or a promise it rejects) is
 * caught here and logged, at most 5 lines per event name per minute, and the run goes on
 * (test/engine-events.test.ts). Listeners run synchronously, in the order they subscribed:
 * one that has slow work to do starts it and returns (the failure notifier wakes its own loop).
 */
import { createLogLimiter, type Logger } from '@oncehook/shared';
import type { RunStatement } from './run-batchers.js';
import type { OpenedGroup } from './store/queries.js';
import type { RunWaiting, StepKind } from './vocabulary.js';

/** The step a piece of handler code runs in (the test kit's request records; the step events). */
export interface CurrentStep {
  runId: number;
  handler: string;
  step: string;
  kind: StepKind;
  attempt: number;
  idempotencyKey: string | null;
}

/** A run attempt that ended: done, to be retried, failed for good (a dead letter), or its lease lost. */
export interface RunEnded {
  source: string;
  /** The event's type as stored (a metric bounds it itself). */
  type: string;
  handler: string;
  outcome: 'done' | 'retry' | 'failed' | 'lease-lost';
  /** The seconds the job that ran it took (its dispatch included when it dispatched). */
  seconds: number;
}

/** Every event the engine emits, by name, with what its listeners receive. */
export interface EngineEventMap {
  /** A run attempt ended. */
  'run:ended': RunEnded;
  /** A run did not start: paused, or over its concurrency or rate limit (not an attempt). */
  'run:waiting': { source: string; handler: string; reason: RunWaiting };
  /** An event that no loaded handler takes was recorded (UNHANDLED_EVENTS says as what). */
  'event:unhandled': { source: string; type: string };
  /** An external step's function is about to be called with this key. */
  'step:calling': CurrentStep;
  /** A step's record committed (a local step: with its writes). */
  'step:committed': CurrentStep;
  /** One dispatch statement committed for this many events (group commit). */
  'dispatch:batch': { events: number };
  /**
   * One statement of the worker's own about runs sent for this many runs (group commit,
   * run-batchers.ts): `done` (a run's done), `proof` (the lease proof before an external call),
   * `record` (an external step's record; a `final` one with its run's done).
   */
  'runs:batch': { statement: RunStatement; runs: number };
  /**
   * A reconciler pass this process led committed: what it took back, and the failure groups it
   * opened (their notifications are stored rows; the notifier sends them).
   */
  'reconciler:led': { reclaimed: number; requeued: number; opened: OpenedGroup[] };
}

export type EngineEventName = keyof EngineEventMap;
export type EngineListener<K extends EngineEventName> = (payload: EngineEventMap[K]) => void | Promise<void>;

export interface EngineEvents {
  /** Subscribes; returns the function that unsubscribes. */
  on<K extends EngineEventName>(name: K, listener: EngineListener<K>): () => void;
  /** Calls every listener of `name`; a listener's error is logged, never thrown to the emitter. */
  emit<K extends EngineEventName>(name: K, payload: EngineEventMap[K]): void;
  /** Whether anyone listens (an emitter skips building a payload nobody reads). */
  has(name: EngineEventName): boolean;
}

export function createEngineEvents(log: Logger): EngineEvents {
  const listeners = new Map<EngineEventName, Set<EngineListener<never>>>();
  const limit = createLogLimiter({ windowMs: 60_000, perWindow: 5 });
  const failed = (name: EngineEventName, error: unknown) => {
    const { log: allowed, suppressed } = limit(name);
    if (allowed) log.warn({ err: error, event: name, suppressed }, `a listener of "${name}" failed; the run is not affected`);
  };
  return {
    on(name, listener) {
      const set = listeners.get(name) ?? new Set();
      listeners.set(name, set);
      set.add(listener as EngineListener<never>);
      return () => {
        set.delete(listener as EngineListener<never>);
      };
    },
    emit(name, payload) {
      const set = listeners.get(name);
      if (!set) return;
      for (const listener of set) {
        try {
          // mutant: listener-error-reaches-run
          const result = (listener as EngineListener<typeof name>)(payload);
          if (result instanceof Promise) result.catch((error: unknown) => failed(name, error));
        } catch (error) {
          failed(name, error);
        }
      }
    },
    has(name) {
      return (listeners.get(name)?.size ?? 0) > 0;
    },
  };
}
