/**
 * Prometheus metrics (prom-client). One registry per process, exposed on GET /metrics.
 *
 * webhook_events_total{provider,type,result}  every delivery's outcome at the edge:
 *   new | duplicate | rejected | error. Duplicates are a normal, counted outcome, never an error.
 * webhook_rejections_total{provider,reason}   why deliveries were refused (bad_signature,
 *   timestamp_too_old, malformed_payload, ...).
 * webhook_ingest_duration_seconds{result}     time from request to answer.
 */
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export type EdgeResult = 'new' | 'duplicate' | 'rejected' | 'error';

export interface IngestMetrics {
  registry: Registry;
  eventsTotal: Counter<'provider' | 'type' | 'result'>;
  rejectionsTotal: Counter<'provider' | 'reason'>;
  ingestDuration: Histogram<'result'>;
}

export function createIngestMetrics(options: { defaultMetrics?: boolean } = {}): IngestMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return {
    registry,
    eventsTotal: new Counter({
      name: 'webhook_events_total',
      help: 'Deliveries by provider, event type and outcome at the edge (new, duplicate, rejected, error)',
      labelNames: ['provider', 'type', 'result'],
      registers: [registry],
    }),
    rejectionsTotal: new Counter({
      name: 'webhook_rejections_total',
      help: 'Deliveries refused at the edge, by reason',
      labelNames: ['provider', 'reason'],
      registers: [registry],
    }),
    ingestDuration: new Histogram({
      name: 'webhook_ingest_duration_seconds',
      help: 'Time from request to answer at the edge',
      labelNames: ['result'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
  };
}
