/**
 * Prometheus metrics (prom-client). One registry per process, exposed on GET /metrics.
 *
 * webhook_events_total{source,type,result}  every delivery's outcome at the edge:
 *   new | duplicate | rejected | error | expired (older than the retention horizon). Duplicates
 *   are a normal, counted outcome, never an error.
 * webhook_rejections_total{source,reason}   why deliveries were refused (bad_signature,
 *   timestamp_too_old, malformed_payload, ...).
 * webhook_ingest_duration_seconds{result}     time from request to answer.
 * oncehook_db_statements_total                statements sent to Postgres (BEGIN/COMMIT included);
 *   with webhook_events_total, the statements per delivery (the bench reports it).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * A source under its name, `source`, and under `provider`, its name before (kept for one
 * release, CHANGELOG.md): a metric series' labels, and the fields of ingest's answers.
 * Dashboards and alerts read `source`.
 */
export function sourceFields(source: string): { source: string; provider: string } {
  return { source, provider: source };
}

/** The label names of `sourceLabels`. */
type SourceLabel = 'source' | 'provider';

export type EdgeResult = 'new' | 'duplicate' | 'rejected' | 'error' | 'expired';

export interface IngestMetrics {
  registry: Registry;
  eventsTotal: Counter<SourceLabel | 'type' | 'result'>;
  rejectionsTotal: Counter<SourceLabel | 'reason'>;
  ingestDuration: Histogram<'result'>;
  /** Body bytes held by deliveries in progress (edge-guards.ts). */
  inflightBodyBytes: Gauge;
  dbStatements: Counter;
  dbRoundTrips: Counter;
}

export function createIngestMetrics(options: { defaultMetrics?: boolean } = {}): IngestMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return {
    registry,
    eventsTotal: new Counter({
      name: 'webhook_events_total',
      help: 'Deliveries by source, event type and outcome at the edge (new, duplicate, rejected, error)',
      labelNames: ['source', 'provider', 'type', 'result'],
      registers: [registry],
    }),
    rejectionsTotal: new Counter({
      name: 'webhook_rejections_total',
      help: 'Deliveries refused at the edge, by reason',
      labelNames: ['source', 'provider', 'reason'],
      registers: [registry],
    }),
    ingestDuration: new Histogram({
      name: 'webhook_ingest_duration_seconds',
      help: 'Time from request to answer at the edge',
      labelNames: ['result'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
    inflightBodyBytes: new Gauge({
      name: 'webhook_inflight_body_bytes',
      help: 'Body bytes held by deliveries in progress, counted as they arrive (at most MAX_INFLIGHT_BODY_BYTES)',
      registers: [registry],
    }),
    dbStatements: dbStatementsCounter(registry),
    dbRoundTrips: dbRoundTripsCounter(registry),
  };
}

/**
 * Worker metrics (GET /metrics on each worker's METRICS_PORT).
 *
 * webhook_processing_duration_seconds{source,type,handler,outcome}  one run's attempt, lease to verdict
 * webhook_events_processed_total{source,type,handler,outcome}       done | failed | retry | lease-lost
 * webhook_events_unhandled_total{source,type}                       events no loaded handler was registered for
 * webhook_events_by_state{state}                                      events received (not dispatched); runs processing and failed
 * webhook_events_stuck{kind}                                          processing_lease_expired | received_not_picked_up (older than REQUEUE_AFTER_MS)
 * webhook_dead_letters                                                handler runs in `failed`
 * webhook_queue_jobs{state}                                           queue job counts (waiting, active, delayed, failed, completed)
 * webhook_queue_oldest_waiting_seconds                                age of the oldest waiting job (0 when none)
 * webhook_reconciler_recoveries_total{kind}                           reclaimed (expired lease) | requeued (lost job)
 * webhook_reconciler_leader                                           1 if this process ran the last reconciler pass
 * webhook_outbound_calls_total{api,outcome}                           ok | retryable | permanent | network_error | timeout
 * oncehook_db_statements_total                                        statements sent to Postgres (BEGIN/COMMIT included)
 * oncehook_dispatch_batch_size                                        events dispatched per statement (dispatch-batcher.ts's group commit)
 * oncehook_run_batch_size{statement}                                  runs per statement of the worker's own about runs: done | proof | record (run-batchers.ts)
 * oncehook_runs_delayed_total{handler,reason}                         runs that did not start: paused | concurrency | rate-limit
 * oncehook_runs_waiting{handler,reason}                               runs waiting now, by reason (flow control)
 * oncehook_paused{scope,name,by}                                      1 while a handler or a source is paused (by: operator | circuit-breaker)
 * oncehook_paused_seconds{scope,name}                                 how long it has been paused (alert OncehookPausedTooLong)
 * The gauges are refreshed by each worker's reconciler loop (every RECONCILE_INTERVAL_MS).
 */
export interface WorkerMetrics {
  registry: Registry;
  processingDuration: Histogram<SourceLabel | 'type' | 'handler' | 'outcome'>;
  processedTotal: Counter<SourceLabel | 'type' | 'handler' | 'outcome'>;
  unhandledTotal: Counter<SourceLabel | 'type'>;
  eventsByState: Gauge<'state'>;
  stuck: Gauge<'kind'>;
  deadLetters: Gauge;
  queueJobs: Gauge<'state'>;
  oldestWaitingSeconds: Gauge;
  recoveriesTotal: Counter<'kind'>;
  reconcilerLeader: Gauge;
  outboundCalls: Counter<'api' | 'outcome'>;
  dbStatements: Counter;
  dbRoundTrips: Counter;
  /** Events per dispatch statement (group commit): 1 under light load, more as jobs arrive faster than one statement takes. */
  dispatchBatchSize: Histogram;
  /** Runs per statement of the worker's own about runs (group commit), by statement: done, proof, record. */
  runBatchSize: Histogram<'statement'>;
  runsDelayedTotal: Counter<'handler' | 'reason'>;
  failureGroupsOpened: Counter<'handler'>;
  failureGroups: Gauge<'handler'>;
  failureGroupRuns: Gauge<'handler'>;
  runsWaiting: Gauge<'handler' | 'reason'>;
  paused: Gauge<'scope' | 'name' | 'by'>;
  pausedSeconds: Gauge<'scope' | 'name'>;
  /** Destinations: each call by outcome (`delivered`, `retry`, `rejected`, `unreachable`), its latency, the calls in flight. */
  destinationCalls: Counter<'destination' | 'outcome'>;
  destinationCallSeconds: Histogram<'destination'>;
  destinationInFlight: Gauge<'destination'>;
  /** The scheduled backfill: each listed event by result (`known`, `new`, `refused`, `expired`); its passes by outcome (`ok`, `error`). */
  backfillEvents: Counter<'source' | 'result'>;
  backfillPasses: Counter<'source' | 'outcome'>;
}

/** The latency buckets of a run attempt (webhook_processing_duration_seconds), seconds; the Activity page's percentiles read them. */
export const RUN_LATENCY_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function createWorkerMetrics(options: { defaultMetrics?: boolean } = {}): WorkerMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  return {
    registry,
    processingDuration: new Histogram({
      name: 'webhook_processing_duration_seconds',
      help: 'Time one attempt of a handler run takes, from lease to verdict',
      labelNames: ['source', 'provider', 'type', 'handler', 'outcome'],
      buckets: RUN_LATENCY_BUCKETS_S,
      registers,
    }),
    processedTotal: new Counter({
      name: 'webhook_events_processed_total',
      help: 'Handler run verdicts by outcome',
      labelNames: ['source', 'provider', 'type', 'handler', 'outcome'],
      registers,
    }),
    unhandledTotal: new Counter({
      name: 'webhook_events_unhandled_total',
      help: 'Events no loaded handler is registered for (UNHANDLED_EVENTS decides done or failed)',
      labelNames: ['source', 'provider', 'type'],
      registers,
    }),
    eventsByState: new Gauge({
      name: 'webhook_events_by_state',
      help: 'Events received (not dispatched yet); handler runs received, processing and failed',
      labelNames: ['state'],
      registers,
    }),
    stuck: new Gauge({
      name: 'webhook_events_stuck',
      help: 'Handler runs past their lease (processing), or events and runs past the re-enqueue threshold (received)',
      labelNames: ['kind'],
      registers,
    }),
    deadLetters: new Gauge({ name: 'webhook_dead_letters', help: 'Handler runs in failed (dead letters)', registers }),
    queueJobs: new Gauge({ name: 'webhook_queue_jobs', help: 'Queue jobs by state (BullMQ on Redis; the queue table on Postgres)', labelNames: ['state'], registers }),
    oldestWaitingSeconds: new Gauge({ name: 'webhook_queue_oldest_waiting_seconds', help: 'Age of the oldest waiting job', registers }),
    recoveriesTotal: new Counter({ name: 'webhook_reconciler_recoveries_total', help: 'Events and runs the reconciler recovered', labelNames: ['kind'], registers }),
    reconcilerLeader: new Gauge({ name: 'webhook_reconciler_leader', help: '1 if this process ran the last reconciler pass', registers }),
    outboundCalls: new Counter({ name: 'webhook_outbound_calls_total', help: 'Outbound API tries by API and outcome', labelNames: ['api', 'outcome'], registers }),
    dbStatements: dbStatementsCounter(registry),
    dbRoundTrips: dbRoundTripsCounter(registry),
    dispatchBatchSize: new Histogram({
      name: 'oncehook_dispatch_batch_size',
      help: 'Events dispatched per statement (group commit of the dispatches that arrive while one is in flight)',
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers,
    }),
    runBatchSize: new Histogram({
      name: 'oncehook_run_batch_size',
      help: "Runs per statement of the worker's own about its runs (group commit): done (a run's done), proof (the lease proof before an external call), record (an external step's record)",
      labelNames: ['statement'],
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers,
    }),
    runsDelayedTotal: new Counter({
      name: 'oncehook_runs_delayed_total',
      help: 'Runs that did not start when their job came: paused, over their concurrency or their rate limit (each look counts once)',
      labelNames: ['handler', 'reason'],
      registers,
    }),
    failureGroupsOpened: new Counter({
      name: 'oncehook_failure_groups_opened_total',
      help: 'Failure groups opened (a new error shape of a handler, or one failing again after it closed or was resolved), counted by the reconciler leader',
      labelNames: ['handler'],
      registers,
    }),
    failureGroups: new Gauge({ name: 'oncehook_failure_groups', help: 'Failure groups open now (not resolved), per handler', labelNames: ['handler'], registers }),
    failureGroupRuns: new Gauge({
      name: 'oncehook_failure_group_runs',
      help: 'Failed and retrying runs in the open failure groups, per handler',
      labelNames: ['handler'],
      registers,
    }),
    runsWaiting: new Gauge({ name: 'oncehook_runs_waiting', help: 'Runs waiting now for a pause to end, a slot or the rate', labelNames: ['handler', 'reason'], registers }),
    paused: new Gauge({
      name: 'oncehook_paused',
      help: '1 while the handler or source is paused (oncehook pause), by an operator or its circuit breaker',
      labelNames: ['scope', 'name', 'by'],
      registers,
    }),
    pausedSeconds: new Gauge({ name: 'oncehook_paused_seconds', help: 'Seconds since the handler or source was paused', labelNames: ['scope', 'name'], registers }),
    destinationCalls: new Counter({
      name: 'oncehook_destination_calls_total',
      help: 'Calls to destinations by outcome: delivered (2xx), retry (408/409/425/429/5xx, timeout), rejected (other 4xx, a redirect: dead letter), unreachable (no answer)',
      labelNames: ['destination', 'outcome'],
      registers,
    }),
    destinationCallSeconds: new Histogram({
      name: 'oncehook_destination_call_seconds',
      help: 'Time from sending a call to a destination to its answer (or to giving up on it)',
      labelNames: ['destination'],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    destinationInFlight: new Gauge({
      name: 'oncehook_destination_in_flight',
      help: 'Calls to each destination in flight now, from this process',
      labelNames: ['destination'],
      registers,
    }),
    backfillEvents: new Counter({
      name: 'oncehook_backfill_events_total',
      help: "Events the scheduled backfill listed from a provider's API, by result: known (delivered before), new (never delivered: claimed now), refused, expired",
      labelNames: ['source', 'result'],
      registers,
    }),
    backfillPasses: new Counter({
      name: 'oncehook_backfill_passes_total',
      help: 'Scheduled backfill passes this process ran, by outcome (ok, error: the API refused or failed)',
      labelNames: ['source', 'outcome'],
      registers,
    }),
  };
}

/** Round trips to Postgres this process made (createPool's onRoundTrip): a pipelined BEGIN + statement is one. */
function dbRoundTripsCounter(registry: Registry): Counter {
  return new Counter({
    name: 'oncehook_db_round_trips_total',
    help: 'Round trips to Postgres by this process (a pipelined BEGIN with a statement, or a statement with COMMIT, is one)',
    registers: [registry],
  });
}

/** Statements this process sent to Postgres (createPool's onStatement). */
function dbStatementsCounter(registry: Registry): Counter {
  return new Counter({
    name: 'oncehook_db_statements_total',
    help: 'Statements sent to Postgres by this process (BEGIN and COMMIT included)',
    registers: [registry],
  });
}
