/**
 * The ingest HTTP app: `createApp(deps)` returns a Hono app; server.ts owns listen and
 * SIGTERM; tests call it over real HTTP or with `app.request()`.
 *
 * Routes
 *   POST /webhooks/:source   receive a delivery (see receive-webhook.ts)
 *   GET  /webhooks/:source   a sender's subscription check (Meta's hub.challenge); 405 otherwise
 *   GET  /healthz              the process is up
 *   GET  /readyz               Postgres and Redis answer
 *   GET  /metrics              Prometheus metrics
 *   /admin/...                 Bull Board, events view, admin API (admin.ts; only with credentials)
 */
import { Hono } from 'hono';
import { inSpan, type Faults, type IngestMetrics, type Logger, type Pool } from '@oncehook/shared';
import { metricsAuthorized, type WebhookSource } from '@oncehook/providers';
import type { JobTarget, Queries, QueueBackend } from '@oncehook/core';
import { HTTPException } from 'hono/http-exception';
import { SpanKind } from '@opentelemetry/api';
import { mountAdmin, type AdminSettings } from './admin/index.js';
import { adminConfigured } from './admin/auth.js';
import { createEdgeGuards } from './edge-guards.js';
import { createTypeLabels, type TypeLabels } from './type-labels.js';
import { checkReadiness, createClaimBatcher } from '@oncehook/core';
import { createEnqueueRelay, type EnqueueRelay } from '@oncehook/core';
import { RecentDuplicates } from './recent-duplicates.js';
import { receiveWebhook, replyResponse } from './receive-webhook.js';
import type { IngestSettings } from './ingest-settings.js';

export type { IngestSettings } from './ingest-settings.js';

/**
 * Everything the app is built from. Each route module receives only its part of it
 * (`WebhookDeps`, `EdgeDeps`, `AdminDeps`: declared where they are used).
 */
export interface IngestDeps {
  pool: Pool;
  queries: Queries;
  /** The event queue(s); sharded queues route each job by its event key. */
  queue: JobTarget;
  /** Where the queue lives (QUEUE_BACKEND): names the readiness check. */
  queueBackend: QueueBackend;
  /** Answers when the queue's store (Redis, or Postgres) is reachable; used by /readyz. */
  pingQueue: () => Promise<unknown>;
  sources: ReadonlyMap<string, WebhookSource>;
  log: Logger;
  faults: Faults;
  metrics: IngestMetrics;
  settings: IngestSettings;
  /** Admin credentials; without them no admin route is mounted. */
  admin?: AdminSettings;
  /** The admin's own pool (ADMIN_POOL_SIZE, with its timeouts): required with `admin`, so no admin query takes a delivery's connection. */
  adminPool?: Pool;
  /** Filled by receive-webhook, shown by the admin events view (created by createApp when absent). */
  recentDuplicates?: RecentDuplicates;
  /** When set, GET /metrics needs `Authorization: Bearer <token>` (METRICS_TOKEN). */
  metricsToken?: string;
  /** The bounded `type` label (created by createApp when absent, never refreshed then). */
  typeLabels?: TypeLabels;
  /** Adds new events' jobs to the queue after the answers; created by createApp when absent. */
  relay?: EnqueueRelay;
  now?: () => Date;
}

export function createApp(deps: IngestDeps): Hono {
  const app = new Hono();
  deps.recentDuplicates ??= new RecentDuplicates();
  deps.relay ??= createEnqueueRelay({ queue: deps.queue, log: deps.log, faults: deps.faults, enqueueTimeoutMs: deps.settings.enqueueTimeoutMs });
  const claims = createClaimBatcher({
    pool: deps.pool,
    queries: deps.queries,
    relay: deps.relay,
    log: deps.log,
    faults: deps.faults,
    maxWaiting: deps.settings.maxWaitingClaims,
    breakerOpenMs: deps.settings.breakerOpenMs,
    claimTimeoutMs: deps.settings.claimTimeoutMs,
    logDeliveries: deps.settings.logDeliveries,
  });
  deps.typeLabels ??= createTypeLabels({ pool: deps.pool, queries: deps.queries, log: deps.log });
  const edge = createEdgeGuards(deps, claims);
  const path = { claims, relay: deps.relay };

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/metrics', async (c) => {
    if (!metricsAuthorized(deps.metricsToken, c.req.header('authorization'))) {
      c.header('WWW-Authenticate', 'Bearer');
      return c.json({ error: 'unauthorized', message: '/metrics needs Authorization: Bearer <METRICS_TOKEN>' }, 401);
    }
    c.header('Content-Type', deps.metrics.registry.contentType);
    return c.body(await deps.metrics.registry.metrics());
  });

  app.get('/readyz', async (c) => {
    const { ready, body } = await checkReadiness(deps.pool, deps.pingQueue, deps.queueBackend);
    return c.json(body, ready ? 200 : 503);
  });

  app.post(
    '/webhooks/:source',
    // Unknown source, missing or malformed signature headers, a stale signed timestamp, a body
    // too large or more than the budget has left: answered before reading a byte of the body
    // (edge-guards.ts). The body itself is read by edge.readBody, straight from Node's request
    // (never through a web Request: building one per delivery cost 12% of ingest CPU), counted
    // against BODY_LIMIT_BYTES and the in-flight budget as it arrives.
    edge.beforeBody,
    // One span per delivery (tracing.ts; a no-op unless OTEL_* asks for traces).
    (c) => inSpan('webhook.receive', { kind: SpanKind.SERVER, attributes: { 'oncehook.source': c.req.param('source') ?? '' } }, () => receiveWebhook(c, deps, path, edge)),
  );

  // A sender that checks the endpoint with a GET (Meta): answered by the source, nothing stored.
  app.get('/webhooks/:source', (c, next) => {
    const source = deps.sources.get(c.req.param('source'));
    if (!source?.get) return next();
    const reply = source.get(new URL(c.req.url).searchParams);
    deps.log.info({ provider: source.name, status: reply.status ?? 200 }, reply.note);
    return replyResponse(c, reply);
  });

  app.all('/webhooks/:source', (c) => {
    c.header('Allow', 'POST');
    return c.json({ error: 'method_not_allowed', message: 'webhooks are delivered with POST' }, 405);
  });

  if (deps.admin && adminConfigured(deps.admin)) {
    if (!deps.adminPool) throw new Error('createApp: `admin` needs `adminPool`, a pool of its own (buildIngest makes it from ADMIN_POOL_SIZE)');
    // mutant: admin-shares-ingest-pool
    if (mountAdmin(app, { ...deps, pool: deps.adminPool }, deps.admin)) deps.log.info({ readOnly: deps.admin.readOnly }, 'admin mounted at /admin');
  }

  app.notFound((c) => c.json({ error: 'not_found', message: `no route for ${c.req.method} ${c.req.path}` }, 404));

  app.onError((error, c) => {
    // Middleware answers (401 from the admin's auth) arrive as HTTPExceptions: pass them on.
    if (error instanceof HTTPException) return error.getResponse();
    deps.log.error({ err: error, path: c.req.path }, 'unhandled error');
    return c.json({ error: 'internal_error', message: 'unexpected error; retry later' }, 500);
  });

  return app;
}
