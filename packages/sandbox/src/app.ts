/**
 * Sandbox providers: a payment API, an email API and a fulfilment API in one real HTTP
 * server, behaving like the real ones where exactly-once depends on it, faults included.
 * Used by the tests, the demo and load runs. Everything is in memory.
 *
 *   POST /payment/v1/charges       Idempotency-Key header, Stripe's semantics:
 *                                    same key + same parameters -> stored response replayed
 *                                      (header Idempotent-Replayed: true), nothing applied
 *                                    same key + different parameters -> 400 idempotency_error
 *                                    same key while the first is still in flight -> 409
 *   POST /email/emails             dedupes on the body's `dedupe_key` (same rules)
 *   POST /fulfilment/shipments     Idempotency-Key header (same rules)
 *   POST /work/tasks               a slow API that measures ITSELF how many calls are in flight:
 *                                    {task, key?, ms} holds the call ms milliseconds; per task it
 *                                    records the most calls in flight at once, per key too, and
 *                                    when each call started; Idempotency-Key dedupes as above. A
 *                                    call whose client goes away (aborted, connection closed)
 *                                    stops at once, applies nothing and no longer counts as in
 *                                    flight (`abandoned`), as a server that honours cancellation
 *   GET  /work/stats               those measurements (flow-control tests read them)
 *   GET  /v1/events, /stripe/_*    Stripe's events API and its webhook deliveries, for
 *                                  `oncehook backfill stripe` (stripe-events-api.ts)
 *   GET  /repos/.../deliveries, /github/_*   GitHub's hook deliveries API and its deliveries,
 *                                  for `oncehook backfill github` (github-deliveries-api.ts)
 *   GET  /notifications, /paddle/_*  Paddle Billing's notifications API and its deliveries,
 *                                  for `oncehook backfill paddle` (paddle-notifications-api.ts)
 *   GET  /stats                    effects actually applied, per service and per key
 *   POST /faults                   inject a fault rule (see FaultRule); DELETE /faults clears
 *   POST /reset                    forget everything
 *
 * Faults (per service):
 *   fail_before      answer 500 without applying (the key is not stored: a retry applies)
 *   apply_then_fail  apply, store the response, then drop the connection: the effect
 *                    happened but the caller never hears of it
 *   delay            apply after `delayMs` (past the caller's timeout: its retry meets 409)
 *   status           answer `status` without applying (e.g. 400 to test permanent errors)
 * A rule fires on the first request of every key (`firstAttemptPerKey`), a number of times
 * (`times`), or at random (`probability`).
 */
import { createHash, randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { Hono, type Context } from 'hono';
import { createGitHubDeliveriesApi } from './github-deliveries-api.js';
import { createPaddleNotificationsApi } from './paddle-notifications-api.js';
import { createStripeEventsApi } from './stripe-events-api.js';

export { SANDBOX_GITHUB_HOOK, SANDBOX_GITHUB_TOKEN } from './github-deliveries-api.js';
export { SANDBOX_PADDLE_API_KEY } from './paddle-notifications-api.js';
export { SANDBOX_STRIPE_API_KEY } from './stripe-events-api.js';

export type Service = 'payment' | 'email' | 'fulfilment';
export const SERVICES: readonly Service[] = ['payment', 'email', 'fulfilment'];

export interface FaultRule {
  service: Service;
  mode: 'fail_before' | 'apply_then_fail' | 'delay' | 'status';
  status?: number;
  delayMs?: number;
  firstAttemptPerKey?: boolean;
  times?: number;
  probability?: number;
}

interface Stored {
  fingerprint: string;
  state: 'in_flight' | 'done';
  body?: unknown;
}

/** What the work API measured of one task (POST /work/tasks). */
export interface WorkStats {
  calls: number;
  /** Calls that ran (not answered from the idempotency store). */
  applied: number;
  replays: number;
  /** The most calls of this task in flight at once. */
  maxInFlight: number;
  /** The most calls of one key of this task in flight at once. */
  maxInFlightPerKey: number;
  /** The most distinct keys in flight at once (different keys overlapping). */
  maxKeysInFlight: number;
  /** When each applied call started (ms since the epoch). */
  starts: number[];
  /** Applied calls per idempotency key: every value must be 1. */
  appliedByKey: Record<string, number>;
  /** Calls whose client went away before the answer: stopped, nothing applied. */
  abandoned: number;
}

export interface ServiceStats {
  requests: number;
  /** Effects actually applied. */
  applied: number;
  /** Requests answered from the idempotency store (nothing applied). */
  replays: number;
  conflicts: number;
  faults: number;
  /** Applied effects per key: every value must be 1. */
  appliedByKey: Record<string, number>;
  /**
   * Every request's idempotency key, in arrival order (null: the request carried none). Lets a
   * test check that all tries and attempts of one step sent the SAME key, not just that one
   * key was applied.
   */
  requestKeys: (string | null)[];
  effects: Record<string, unknown>[];
}

function emptyStats(): ServiceStats {
  return { requests: 0, applied: 0, replays: 0, conflicts: 0, faults: 0, appliedByKey: {}, requestKeys: [], effects: [] };
}

export interface Sandbox {
  app: Hono;
  stats(): Record<Service, ServiceStats>;
  /** The work API's measurements, per task. */
  workStats(): Record<string, WorkStats>;
  setFaults(rules: FaultRule[]): void;
  reset(): void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function fingerprint(body: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(body ?? null))
    .digest('hex');
}

/** A JSON object body, or null (not JSON, or not an object). */
async function jsonBody(c: Context): Promise<Record<string, unknown> | null> {
  try {
    const body: unknown = await c.req.json();
    return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The three services' memory (idempotency stores, stats, fault rules) and their shared effect. */
function createEffects() {
  let stores = new Map<Service, Map<string, Stored>>(SERVICES.map((s) => [s, new Map()]));
  let stats = new Map<Service, ServiceStats>(SERVICES.map((s) => [s, emptyStats()]));
  let rules: (FaultRule & { seen: Set<string> })[] = [];

  function pickFault(service: Service, key: string | null): FaultRule | null {
    for (const rule of rules) {
      if (rule.service !== service) continue;
      if (rule.firstAttemptPerKey) {
        if (key === null || rule.seen.has(key)) continue;
        rule.seen.add(key);
        return rule;
      }
      if (rule.times !== undefined) {
        if (rule.times <= 0) continue;
        rule.times -= 1;
        return rule;
      }
      if (rule.probability !== undefined && Math.random() < rule.probability) return rule;
    }
    return null;
  }

  /**
   * The idempotent effect, shared by the three services. `apply` runs at most once per key
   * (when a key is given); its result is the stored response.
   */
  async function effect(c: Context, service: Service, key: string | null, params: unknown, apply: () => Record<string, unknown>): Promise<Response> {
    const s = stats.get(service)!;
    const store = stores.get(service)!;
    s.requests += 1;
    s.requestKeys.push(key);
    const fp = fingerprint(params);
    if (key !== null) {
      const existing = store.get(key);
      if (existing) {
        if (existing.fingerprint !== fp) {
          s.conflicts += 1;
          return c.json(
            { error: { type: 'idempotency_error', message: 'Keys for idempotent requests can only be used with the same parameters they were first used with.' } },
            400,
          );
        }
        if (existing.state === 'in_flight') {
          s.conflicts += 1;
          return c.json({ error: { type: 'idempotency_error', message: 'There is currently another in-progress request using this Idempotent Key.' } }, 409);
        }
        s.replays += 1;
        c.header('Idempotent-Replayed', 'true');
        return c.json(existing.body as Record<string, unknown>, 200);
      }
    }
    const fault = pickFault(service, key);
    if (fault) s.faults += 1;
    if (fault?.mode === 'fail_before') return c.json({ error: { type: 'api_error', message: 'injected failure before applying' } }, 500);
    if (fault?.mode === 'status') return c.json({ error: { type: 'injected', message: `injected status ${fault.status}` } }, (fault.status ?? 500) as 400);

    if (key !== null) store.set(key, { fingerprint: fp, state: 'in_flight' });
    if (fault?.mode === 'delay') await sleep(fault.delayMs ?? 1_000);
    const body = apply();
    s.applied += 1;
    s.effects.push({ ...body, key });
    if (key !== null) {
      s.appliedByKey[key] = (s.appliedByKey[key] ?? 0) + 1;
      store.set(key, { fingerprint: fp, state: 'done', body });
    }
    if (fault?.mode === 'apply_then_fail') {
      // The effect happened; the caller never hears of it.
      (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing?.socket?.destroy();
      return c.json({ error: 'connection dropped' }, 500);
    }
    return c.json(body, 200);
  }

  return {
    effect,
    stats: () => Object.fromEntries(SERVICES.map((s) => [s, stats.get(s)!])) as Record<Service, ServiceStats>,
    setFaults(next: FaultRule[]) {
      rules = next.map((rule) => ({ ...rule, seen: new Set<string>() }));
    },
    reset() {
      stores = new Map(SERVICES.map((s) => [s, new Map()]));
      stats = new Map(SERVICES.map((s) => [s, emptyStats()]));
      rules = [];
    },
  };
}

/** The work API: calls held open, in-flight measured by the server itself. */
function createWorkApi() {
  let work = new Map<string, WorkStats & { inFlightByKey: Map<string, number>; inFlight: number }>();
  const workOf = (task: string) => {
    let w = work.get(task);
    if (!w) {
      w = {
        calls: 0,
        applied: 0,
        replays: 0,
        abandoned: 0,
        inFlight: 0,
        maxInFlight: 0,
        maxInFlightPerKey: 0,
        maxKeysInFlight: 0,
        starts: [],
        appliedByKey: {},
        inFlightByKey: new Map(),
      };
      work.set(task, w);
    }
    return w;
  };
  const workDone = new Map<string, unknown>();

  /** POST /work/tasks: held for `ms` (or until the client goes away), measured, deduplicated. */
  async function call(c: Context): Promise<Response> {
    const body = await jsonBody(c);
    if (!body || typeof body.task !== 'string' || !Number.isSafeInteger(body.ms) || (body.ms as number) < 0 || (body.ms as number) > 60_000) {
      return c.json({ error: 'task (string) and ms (0-60000) are required' }, 400);
    }
    const idem = c.req.header('idempotency-key') ?? null;
    const w = workOf(body.task);
    w.calls += 1;
    if (idem && workDone.has(`${body.task}\0${idem}`)) {
      w.replays += 1;
      return c.json(workDone.get(`${body.task}\0${idem}`), 200, { 'Idempotent-Replayed': 'true' });
    }
    const key = typeof body.key === 'string' ? body.key : '';
    w.starts.push(Date.now());
    w.inFlight += 1;
    w.maxInFlight = Math.max(w.maxInFlight, w.inFlight);
    w.inFlightByKey.set(key, (w.inFlightByKey.get(key) ?? 0) + 1);
    w.maxInFlightPerKey = Math.max(w.maxInFlightPerKey, w.inFlightByKey.get(key)!);
    w.maxKeysInFlight = Math.max(w.maxKeysInFlight, w.inFlightByKey.size);
    // Held for `ms`, or until the client goes away (the request's signal aborts when its
    // connection closes before the answer).
    const signal = c.req.raw.signal;
    let abandoned = false;
    try {
      abandoned = await new Promise<boolean>((resolve) => {
        if (signal.aborted) return resolve(true);
        const timer = setTimeout(() => {
          signal.removeEventListener('abort', onAbort);
          resolve(false);
        }, body.ms as number);
        const onAbort = () => {
          clearTimeout(timer);
          resolve(true);
        };
        signal.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      w.inFlight -= 1;
      const left = w.inFlightByKey.get(key)! - 1;
      if (left === 0) w.inFlightByKey.delete(key);
      else w.inFlightByKey.set(key, left);
    }
    if (abandoned) {
      w.abandoned += 1;
      return c.body(null, 408); // nobody reads it: the client is gone
    }
    const result = { id: `wk_${randomUUID()}`, task: body.task, key };
    w.applied += 1;
    const applyKey = idem ?? result.id;
    w.appliedByKey[applyKey] = (w.appliedByKey[applyKey] ?? 0) + 1;
    if (idem) workDone.set(`${body.task}\0${idem}`, result);
    return c.json(result, 200);
  }
  const workStats = (): Record<string, WorkStats> =>
    Object.fromEntries(
      [...work].map(([task, { inFlightByKey: _k, inFlight: _n, ...rest }]) => [task, { ...rest, starts: [...rest.starts], appliedByKey: { ...rest.appliedByKey } }]),
    );
  return {
    call,
    stats: workStats,
    reset() {
      work = new Map();
      workDone.clear();
    },
  };
}

export function createSandbox(): Sandbox {
  const effects = createEffects();
  const workApi = createWorkApi();
  const { effect } = effects;
  const app = new Hono();

  app.post('/payment/v1/charges', async (c) => {
    const body = await jsonBody(c);
    if (!body || typeof body.customer !== 'string' || !Number.isSafeInteger(body.amount) || (body.amount as number) <= 0 || typeof body.currency !== 'string') {
      return c.json({ error: { type: 'invalid_request_error', message: 'customer, a positive integer amount and currency are required' } }, 400);
    }
    return effect(c, 'payment', c.req.header('idempotency-key') ?? null, body, () => ({
      id: `ch_${randomUUID().replace(/-/g, '').slice(0, 24)}`,
      object: 'charge',
      amount: body.amount,
      currency: body.currency,
      customer: body.customer,
      description: body.description ?? null,
    }));
  });

  app.post('/email/emails', async (c) => {
    const body = await jsonBody(c);
    if (!body || typeof body.to !== 'string' || typeof body.subject !== 'string') {
      return c.json({ error: { type: 'validation_error', message: 'to and subject are required' } }, 422);
    }
    const key = typeof body.dedupe_key === 'string' ? body.dedupe_key : null;
    return effect(c, 'email', key, body, () => ({ id: `em_${randomUUID()}`, to: body.to, subject: body.subject }));
  });

  app.post('/fulfilment/shipments', async (c) => {
    const body = await jsonBody(c);
    if (!body || typeof body.order_id !== 'string' || !Array.isArray(body.items)) {
      return c.json({ error: { type: 'invalid_request', message: 'order_id and items are required' } }, 400);
    }
    return effect(c, 'fulfilment', c.req.header('idempotency-key') ?? null, body, () => ({ id: `shp_${randomUUID()}`, order_id: body.order_id, status: 'requested' }));
  });

  const stripeEvents = createStripeEventsApi();
  stripeEvents.routes(app);
  const githubDeliveries = createGitHubDeliveriesApi();
  githubDeliveries.routes(app);
  const paddleNotifications = createPaddleNotificationsApi();
  paddleNotifications.routes(app);

  app.post('/work/tasks', (c) => workApi.call(c));
  app.get('/work/stats', (c) => c.json(workApi.stats()));

  const sandbox: Sandbox = {
    workStats: workApi.stats,
    app,
    stats: effects.stats,
    setFaults: effects.setFaults,
    reset() {
      effects.reset();
      workApi.reset();
      stripeEvents.reset();
      githubDeliveries.reset();
      paddleNotifications.reset();
    },
  };

  app.get('/stats', (c) => c.json(sandbox.stats()));
  app.post('/faults', async (c) => {
    const body: unknown = await c.req.json().catch(() => null);
    const list = Array.isArray(body) ? body : body ? [body] : [];
    for (const rule of list as FaultRule[]) {
      if (!SERVICES.includes(rule.service) || !['fail_before', 'apply_then_fail', 'delay', 'status'].includes(rule.mode)) {
        return c.json({ error: 'each rule needs service (payment|email|fulfilment) and mode (fail_before|apply_then_fail|delay|status)' }, 400);
      }
    }
    sandbox.setFaults(list as FaultRule[]);
    return c.json({ rules: list.length });
  });
  app.delete('/faults', (c) => {
    sandbox.setFaults([]);
    return c.json({ rules: 0 });
  });
  app.post('/reset', (c) => {
    sandbox.reset();
    return c.json({ ok: true });
  });
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  return sandbox;
}
