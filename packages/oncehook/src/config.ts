/**
 * The processes' configuration (ingest, worker, the command), parsed once at start from the
 * environment.
 *
 * Every tuning constant carries the reason for its default. A bad or missing variable stops
 * the process with one message naming each offending variable (see `ConfigError`), instead
 * of failing later, mid-request, with something less clear.
 *
 * Every variable listed here is documented in README.md ("Configuration").
 */
import { z } from 'zod';
import { ConfigError } from '@oncehook/sdk';
import {
  clusterSlotProblem,
  DEFAULT_ENGINE_SETTINGS,
  DESTINATION_VARIABLES,
  destinationHmacKey,
  loadDestinations,
  type Destination,
  type BackfillScheduleEntry,
  type ClusterSeeds,
} from '@oncehook/core';
import { addressProblem, DEFAULT_SCHEMA, SCHEMA_NAME_PATTERN, withoutEmpty, type Env } from '@oncehook/shared';
import { BACKFILL_KINDS, PROVIDERS, PROVIDER_VARIABLES } from '@oncehook/providers';

/** A comma-separated variable's entries, trimmed, empty ones dropped. */
const commaList = (value: string): string[] =>
  value
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);

/** `90s`, `15m`, `72h`, `30d` -> milliseconds; null when it is not one. */
function durationMs(text: string): number | null {
  const match = /^(\d{1,6})([smhd])$/.exec(text);
  return match ? Number(match[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 's' | 'm' | 'h' | 'd'] : null;
}

/** One BACKFILL_SCHEDULE entry, `source[:kind]=every/window`, checked against its provider's API. */
function backfillScheduleEntry(entry: string): BackfillScheduleEntry | Problem {
  const match = /^([a-z0-9][a-z0-9_-]{0,62})(?::([a-z0-9-]{1,63}))?=([^/]+)\/(.+)$/.exec(entry);
  if (!match) return new Problem(`"${entry.slice(0, 60)}" is not source=every/window (stripe=15m/72h) or source:kind=every/window`);
  const [, source, kindGiven, everyText, windowText] = match as unknown as [string, string, string | undefined, string, string];
  const kind = kindGiven ?? source;
  const provider = PROVIDERS.find((p) => p.kind === kind);
  if (!provider)
    return new Problem(`"${entry}": "${kind}" is not a provider kind${kindGiven ? '' : ` (a source named otherwise than its kind is written source:kind=every/window)`}`);
  if (!provider.backfill) return new Problem(`"${entry}": ${kind} has no API that lists its events; the providers that have one: ${BACKFILL_KINDS.join(', ')}`);
  const everyMs = durationMs(everyText);
  const windowMs = durationMs(windowText);
  if (everyMs === null || windowMs === null) return new Problem(`"${entry}": every and window are durations like 90s, 15m, 72h, 30d`);
  if (everyMs < 1_000) return new Problem(`"${entry}": every must be at least 1s`);
  if (windowMs < everyMs) return new Problem(`"${entry}": the window (${windowText}) must be at least the interval (${everyText}), or events in between are never looked at`);
  if (windowMs > provider.backfill.history.days * 86_400_000) return new Problem(`"${entry}": ${provider.backfill.history.what}; the window ${windowText} is longer`);
  return { source, kind, everyMs, windowMs };
}

/** What is wrong with one entry of a comma-separated variable. */
class Problem {
  constructor(readonly message: string) {}
}

/**
 * A comma-separated variable read entry by entry: `entry` gives the parsed entry, or a
 * Problem saying what is wrong with it (the variable is refused with that message).
 */
const commaSeparated = <T>(entry: (text: string) => T | Problem) =>
  z
    .string()
    .default('')
    .transform((value, ctx) => {
      const entries: T[] = [];
      for (const text of commaList(value)) {
        const parsed = entry(text);
        if (parsed instanceof Problem) {
          ctx.addIssue({ code: 'custom', message: parsed.message });
          return z.NEVER;
        }
        entries.push(parsed);
      }
      return entries;
    });

const integer = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);

/** Settings both apps need. */
const commonSchema = z.object({
  DATABASE_URL: z.string().url().default('postgres://postgres@127.0.0.1:5432/oncehook'),
  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379'),
  /**
   * Seed nodes of a Redis Cluster, comma-separated `redis://[user:password@]host:port` (or
   * `rediss://` for TLS), e.g. `redis://10.0.0.1:6379,redis://10.0.0.2:6379`. When set, every
   * process talks to the cluster through ioredis's Cluster client (following MOVED and ASK,
   * and failovers) and REDIS_URL is not used. Two or three seeds are enough: the client learns
   * the rest from the cluster. Every entry must use the same scheme and credentials.
   */
  REDIS_CLUSTER_NODES: z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value.trim() === '') return undefined;
      const seeds = parseClusterNodes(value);
      if (typeof seeds === 'string') {
        ctx.addIssue({ code: 'custom', message: seeds });
        return z.NEVER;
      }
      return seeds;
    }),
  /**
   * Where the job queue lives. `redis` (default): BullMQ on Redis at REDIS_URL. `postgres`: a
   * table of Oncehook's own in DATABASE_URL (`<QUEUE_PREFIX>_queue.ready`), no Redis at all:
   * the queue's work moves into Postgres (about 2 rows and 1 KB of WAL per event; the pipeline
   * costs about what graphile-worker's does); for deployments whose Postgres has room for it
   * (docs/architecture.md, "Postgres-only mode").
   */
  QUEUE_BACKEND: z.enum(['redis', 'postgres']).default('redis'),
  /**
   * Redis key prefix of the BullMQ queue. Wrap it in braces (`{oncehook}`) on Redis Cluster so
   * that all of a queue's keys hash to one slot. Tests give each run its own prefix.
   */
  QUEUE_PREFIX: z.string().min(1).default('oncehook'),
  /**
   * Queues the events are spread over, by a hash of the event key (queue.ts). 1: one queue,
   * `webhook-events`. N > 1: `{webhook-events-0}` ... `{webhook-events-N-1}`, each name its own
   * Redis Cluster hash tag, so a cluster spreads them over its shards. Every process of one
   * installation must use the same N (a job routed by another N lands in a queue nobody reads
   * until the reconciler re-enqueues it after REQUEUE_AFTER_MS).
   */
  QUEUE_SHARDS: integer(1, 256).default(1),
  /**
   * The Postgres schema of Oncehook's own tables, so they never mix with the application's.
   * Every process of one installation must use the same one.
   */
  ONCEHOOK_SCHEMA: z.string().regex(SCHEMA_NAME_PATTERN, 'ONCEHOOK_SCHEMA must be 1-63 characters of a-z 0-9 _, starting with a letter or _').default(DEFAULT_SCHEMA),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** `json` (one object per line, ISO times: for log pipelines) or `pretty` (readable; `npm start` and the demo). */
  LOG_FORMAT: z.enum(['json', 'pretty']).default('json'),
  /**
   * How often this process writes the minute's activity (its deliveries, or its run attempts and
   * their latency) for the admin's Activity page, one statement each time; the reconciler's
   * leader samples the backlog at its passes. 0: off (the page then shows nothing new).
   */
  ACTIVITY_FLUSH_MS: integer(0, 600_000).default(10_000),
  /** Connections per process. Ingest holds one per in-flight claim, a worker one per job step. */
  DATABASE_POOL_SIZE: integer(1, 1000).default(10),
  /**
   * Longest wait for a Postgres connection. Short, so an unreachable database answers 503 (and
   * opens ingest's circuit) within seconds instead of holding deliveries.
   */
  DATABASE_CONNECT_TIMEOUT_MS: integer(100, 60_000).default(2_000),
  /**
   * When set, GET /metrics (ingest's and each worker's) needs `Authorization: Bearer <token>`
   * (Prometheus: `authorization: { credentials: ... }`). Unset: /metrics is open, so keep it off
   * the internet (docs/operating.md, protecting /metrics).
   */
  METRICS_TOKEN: z.string().min(16, 'METRICS_TOKEN must be at least 16 characters').optional(),
  /**
   * Test-only fault points, e.g. `ingest.after-claim:crash`. See packages/shared/src/faults.ts.
   * Empty in production.
   */
  ONCEHOOK_FAULTS: z.string().default(''),
  /**
   * Days an event's key is kept after it was received: the longest redelivery horizon of the
   * provider plus a margin (docs/providers.md). 35 covers Stripe's 30-day CLI resend, the
   * longest of the built-in providers. Ingest answers a delivery older than this as expired;
   * the worker deletes done events older than this.
   */
  RETENTION_DAYS: integer(1, 3650).default(35),
  /**
   * Days an event's key (the narrow row: dedupe key, body hash, type, final state, times) is
   * kept after its payload, runs and steps were deleted at RETENTION_DAYS. A redelivery within
   * it is a duplicate; past it, ingest answers `expired`. Must be at least every RETENTION_*.
   */
  KEY_RETENTION_DAYS: integer(1, 36500).default(400),
  /** Per-source overrides, `name=days,name=days` (e.g. `shopify=2,slack=1`). */
  RETENTION_OVERRIDES: commaSeparated((entry) => {
    const match = /^([a-z0-9][a-z0-9_-]{0,62})=(\d{1,4})$/.exec(entry);
    return match ? ([match[1]!, Number(match[2])] as const) : new Problem(`"${entry}" is not name=days`);
  }).transform((pairs): Record<string, number> => Object.fromEntries(pairs)),
});

const ingestSchema = z.object({
  PORT: integer(0, 65535).default(3000),
  HOST: z.string().default('0.0.0.0'),
  /**
   * Port of the liveness server (GET /healthz), answered by a thread of its own from a heartbeat
   * of the main event loop (liveness.ts): it answers within milliseconds while a flood keeps
   * the main loop busy for seconds, and says 503 only when the main loop has not run for
   * LIVENESS_STALL_MS. Unset: none (the main port's /healthz, which waits for the event loop).
   * Listens on HOST. Point liveness probes here; readiness stays /readyz on PORT.
   */
  HEALTH_PORT: integer(0, 65535).optional(),
  /**
   * How long the main event loop may go without running before liveness answers 503. 10 s:
   * ten times the worst event-loop delay seen under a 2,300 deliveries/s flood on 2 cores
   * (2.1 s), so a busy ingest is never restarted, and a wedged one is within a probe or two.
   */
  LIVENESS_STALL_MS: integer(1000, 600_000).default(10_000),
  /**
   * Largest accepted request body. 1 MiB covers Stripe, Shopify, Slack, Paddle and Standard
   * Webhooks payloads with room to spare; raise it for GitHub, whose payloads can reach 25 MB.
   * Larger bodies get 413 before anything is parsed or stored.
   */
  BODY_LIMIT_BYTES: integer(1024, 64 * 1024 * 1024).default(1024 * 1024),
  /**
   * A duplicate delivery whose row is still `received` this long after it was last touched
   * re-enqueues the event (idempotently): the provider's retry doubles as a nudge when our
   * own enqueue was lost. Shorter than the reconciler threshold, longer than a normal
   * claim-to-pickup gap so an ordinary concurrent duplicate does not cause queue churn.
   */
  DUPLICATE_REENQUEUE_AFTER_MS: integer(0).default(10_000),
  /** Seconds a 503 asks the provider to wait (`Retry-After`) when the database is unavailable. */
  RETRY_AFTER_SECONDS: integer(1, 3600).default(5),
  /** Upper bound on one bulk add of the enqueue relay (after the answers): past it the reconciler enqueues those events. */
  ENQUEUE_TIMEOUT_MS: integer(50, 60_000).default(1_000),
  /**
   * Bytes of request bodies held by deliveries in progress (being read, verified, waiting for
   * their claim), counted as they arrive (edge-guards.ts): a Content-Length that cannot fit in
   * what is left gets 503 + Retry-After before the body, a body that would overflow it while
   * arriving gets 503 then: memory stays bounded whatever arrives, and sockets that declare
   * much and send little hold only what they sent. A body in progress costs about 4-5 times its size (the bytes, the text, the parsed
   * JSON, the query), so 16 MiB keeps bodies under ~80 MiB of memory; it admits thousands of
   * typical (2-10 KB) deliveries at once. At least BODY_LIMIT_BYTES.
   */
  MAX_INFLIGHT_BODY_BYTES: integer(1024 * 1024, 4 * 1024 * 1024 * 1024).default(16 * 1024 * 1024),
  /** Most deliveries waiting for a claim batch; past it 503 at once (the database is not keeping up). */
  MAX_WAITING_CLAIMS: integer(1, 1_000_000).default(2_000),
  /**
   * Longest a delivery waits for the database to record its claim; past it 503 + Retry-After
   * (the provider retries; if the claim committed after all, the retry is a duplicate). Claims
   * take milliseconds (the whole request's p99 under the bench's heaviest load is ~100 ms);
   * this bounds answers when the database stops answering.
   */
  CLAIM_TIMEOUT_MS: integer(100, 60_000).default(750),
  /**
   * `on`: every delivery (duplicates included) is recorded with its event, in the claim's own
   * statement, for the admin's timeline and delivery counts. `off` saves that insert.
   */
  DELIVERY_LOG: z
    .enum(['on', 'off'])
    .default('on')
    .transform((v) => v === 'on'),
  /** How long claims fail fast (503) after the database failed twice in a row, before one is tried again. */
  CIRCUIT_BREAKER_OPEN_MS: integer(100, 600_000).default(2_000),
  /**
   * A request must be complete (headers and body) within this: slow senders cannot hold
   * connections and buffers. Providers send a webhook in well under a second; 20 s leaves room
   * for a 25 MB GitHub payload on a slow link.
   */
  REQUEST_TIMEOUT_MS: integer(1_000, 600_000).default(20_000),
  /** Headers must arrive within this. */
  HEADERS_TIMEOUT_MS: integer(1_000, 600_000).default(10_000),
  /** Open connections accepted at once; past it new ones are refused by the kernel's backlog. */
  MAX_CONNECTIONS: integer(1, 1_000_000).default(4_096),
  // The providers' variables (STRIPE_WEBHOOK_SECRET, LINEAR_WEBHOOK_SECRET, tolerances, URLs,
  // ...) are declared by each provider's descriptor (providers/providers.ts): PROVIDER_VARIABLES.
  /** JSON file declaring any number of named sources (docs/providers.md, "Many sources"). */
  ONCEHOOK_SOURCES_FILE: z.string().optional(),
  /**
   * Admin (Bull Board, the events view, the admin API) is mounted only when credentials are
   * set: a bearer token, and/or a basic-auth user and password. Unset = no admin route exists.
   */
  ADMIN_TOKEN: z.string().min(16, 'ADMIN_TOKEN must be at least 16 characters').optional(),
  /**
   * Named bearer tokens, `name=token,name=token` (`alice=...,deploy-bot=...`): the name is
   * recorded as the actor of every operator action taken with the token (`token:alice`).
   */
  ADMIN_TOKENS: commaSeparated((entry) => {
    const eq = entry.indexOf('=');
    const label = entry.slice(0, eq);
    const token = entry.slice(eq + 1);
    if (eq <= 0 || !/^[A-Za-z0-9._-]{1,63}$/.test(label)) return new Problem(`each entry is name=token with a name of A-Z a-z 0-9 . _ - (got "${entry.slice(0, 20)}...")`);
    if (token.length < 16) return new Problem(`the token of "${label}" must be at least 16 characters`);
    return { label, token };
  }),
  ADMIN_USERNAME: z.string().optional(),
  ADMIN_PASSWORD: z.string().min(12, 'ADMIN_PASSWORD must be at least 12 characters').optional(),
  /**
   * The origins operators reach the admin at (`https://ops.example.com`), comma-separated, when
   * a proxy rewrites the Host header; admin actions from any other origin are refused (CSRF).
   * Default: the request's own host.
   */
  ADMIN_ORIGINS: commaSeparated((origin) => (/^https?:\/\/[^/\s]+$/.test(origin) ? origin : new Problem(`"${origin}" is not an origin (scheme://host[:port], no path)`))),
  /** Read-only admin: views work, re-drive/replay and Bull Board actions are refused. */
  ADMIN_READ_ONLY: z
    .enum(['true', 'false'])
    .default('false')
    .transform((value) => value === 'true'),
  /**
   * The admin's budget (docs/security.md, "The admin's budget"): its OWN Postgres connections,
   * so no search, page or preview can take one a delivery needs. 2: a page's queries run one
   * after another, so two operators (or two tabs) are served at once; more waits
   * ADMIN_POOL_WAIT_MS, then 503 `admin_busy`.
   */
  ADMIN_POOL_SIZE: integer(1, 50).default(2),
  /** Longest an admin request waits for one of its connections before 503 `admin_busy` (deliveries never wait for these). */
  ADMIN_POOL_WAIT_MS: integer(50, 60_000).default(1_000),
  /**
   * Longest one admin statement may run (every search, page, preview and action); past it the
   * statement is cancelled by Postgres and the request answered 422 `search_too_slow` (a
   * search) or 503. 10 s: a narrowed search over millions of events takes well under a second.
   */
  ADMIN_STATEMENT_TIMEOUT_MS: integer(100, 600_000).default(10_000),
  /** Searches (and bulk previews) one admin user may have running at once; past it 429 `too_many_searches`. */
  ADMIN_SEARCHES_PER_USER: integer(1, 100).default(2),
  /** Failed admin logins accepted from one client address per minute; past it 429 until the minute is over (each failure is logged, never its password). */
  ADMIN_LOGIN_FAILURES_PER_MINUTE: integer(1, 10_000).default(10),
  /** Milliseconds SIGTERM waits for in-flight requests before closing anyway. */
  SHUTDOWN_TIMEOUT_MS: integer(0).default(10_000),
});

const workerSchema = z.object({
  /** Jobs one worker process runs at once. Handlers mostly wait on I/O, so more than cores. */
  WORKER_CONCURRENCY: integer(1, 1000).default(8),
  /**
   * The shards this worker consumes, as comma-separated indexes (`0,1`); empty = all of them.
   * WORKER_CONCURRENCY applies to each consumed shard.
   */
  WORKER_QUEUE_SHARDS: commaSeparated((part) =>
    /^\d{1,3}$/.test(part) ? Number(part) : new Problem(`WORKER_QUEUE_SHARDS must be comma-separated shard indexes like "0,2" (got "${part}")`),
  ),
  // The engine's settings: their defaults, and the reason for each, are @oncehook/core's
  // (DEFAULT_ENGINE_SETTINGS in engine.ts), so the engine used alone and the worker agree.
  /** How long a claim on a handler run lasts without renewal (renewed every third of it). */
  LEASE_MS: integer(500, 24 * 3600 * 1000).default(DEFAULT_ENGINE_SETTINGS.leaseMs),
  /** Attempts before a handler run goes to `failed` (the dead letter state). */
  MAX_ATTEMPTS: integer(1, 1000).default(DEFAULT_ENGINE_SETTINGS.retry.maxAttempts),
  /** First retry delay of a run; doubles per attempt, jittered, capped at 10 minutes (backoff.ts). */
  RETRY_BACKOFF_MS: integer(0).default(DEFAULT_ENGINE_SETTINGS.retry.backoffMs),
  /** How often the reconciler runs a pass (only the leader does work). */
  RECONCILE_INTERVAL_MS: integer(50).default(5_000),
  /**
   * A `received` event or run untouched for this long is assumed lost by Redis (flush,
   * failover, ingest died between commit and enqueue) and re-enqueued. Re-enqueueing one that is
   * still queued is harmless (same jobId), so this only trades Redis round trips for
   * recovery time.
   */
  REQUEUE_AFTER_MS: integer(0).default(30_000),
  /** Most rows one reconciler pass re-enqueues, so one pass stays short under a big backlog. */
  RECONCILE_BATCH_SIZE: integer(1, 100_000).default(500),
  /** Rows one retention batch deletes; small enough that a batch holds its locks for milliseconds. */
  RETENTION_BATCH_SIZE: integer(1, 100_000).default(1_000),
  /** Batches per retention run (a run happens at most once per RETENTION_INTERVAL_MS, on the reconciler leader). */
  RETENTION_MAX_BATCHES: integer(1, 10_000).default(50),
  RETENTION_INTERVAL_MS: integer(1_000).default(60_000),
  /** Milliseconds SIGTERM waits for in-flight jobs before closing anyway (their leases then expire). */
  SHUTDOWN_TIMEOUT_MS: integer(0).default(30_000),
  /**
   * The handler modules this worker runs: comma-separated paths (`.ts` or `.js` files, or
   * directories with an index), relative to the working directory. Each module's default
   * export is a handler (defineHandler) or an array of them. Without it the worker runs no
   * handler, and every event is unhandled (see UNHANDLED_EVENTS).
   */
  ONCEHOOK_HANDLERS: z.string().optional(),
  /**
   * The scheduled backfill (docs/operating.md, "Recovering missed events"): comma-separated
   * `source=every/window` (`stripe=15m/72h`), or `source:kind=every/window` for a source named
   * otherwise than its kind (`stripe-eu:stripe=1h/24h`). Every `every`, the events the provider
   * could not deliver in the last `window` are listed from its API (its key variable, e.g.
   * STRIPE_API_KEY, must be set on the workers) and claimed; one worker at a time runs each
   * source's pass. Empty: none.
   */
  BACKFILL_SCHEDULE: commaSeparated(backfillScheduleEntry),
  /** API calls one scheduled backfill pass makes at most (a page is up to 100 events); the next pass goes on from where it stopped. */
  BACKFILL_MAX_CALLS: integer(1, 10_000).default(20),
  /**
   * What happens to an event no loaded handler is registered for: `done` (recorded with a
   * note; the default, so an event type you do not care about never piles up as a dead
   * letter) or `fail` (a dead letter, so a misspelled type or a forgotten module is noticed).
   * Either way it is counted in webhook_events_unhandled_total.
   */
  UNHANDLED_EVENTS: z.enum(['done', 'fail']).default(DEFAULT_ENGINE_SETTINGS.unhandled),
  /** Port of this worker's GET /metrics and /healthz (0 = any free port, announced on stdout). */
  METRICS_PORT: integer(0, 65535).default(9464),
  /**
   * Listen address of the worker's metrics server. Loopback by default: /metrics has no auth.
   * Expose it (0.0.0.0) only on a private network your Prometheus scrapes (compose does).
   */
  METRICS_HOST: z.string().default('127.0.0.1'),
  /**
   * Where a new failure group is notified (docs/operating.md, "Failure groups"): a Standard
   * Webhooks POST signed with FAILURE_NOTIFY_SECRET, once per opening, by the reconciler's
   * leader. Unset: counted (oncehook_failure_groups_opened_total) and logged only.
   */
  FAILURE_NOTIFY_URL: z
    .url({ protocol: /^https?$/, message: 'FAILURE_NOTIFY_URL must be an http(s) URL' })
    .optional()
    .superRefine((value, ctx) => {
      // An address in the URL is refused now; a name, when the worker starts and at every try.
      const host = value === undefined ? '' : new URL(value).hostname.replace(/^\[(.*)\]$/, '$1');
      const problem = host ? addressProblem(host, host) : null;
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  /** The notifications' signing secret, `whsec_<base64>` (24 bytes or more): required with FAILURE_NOTIFY_URL. */
  FAILURE_NOTIFY_SECRET: z
    .string()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined) return undefined;
      try {
        return destinationHmacKey(value);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: `FAILURE_NOTIFY_SECRET ${(error as Error).message}` });
        return z.NEVER;
      }
    }),
  /** The admin's public URL (`https://ops.example.com`), for the link in a failure group's notification. */
  ADMIN_PUBLIC_URL: z.url({ protocol: /^https?$/, message: 'ADMIN_PUBLIC_URL must be an http(s) URL' }).optional(),
});

/** Every variable each process kind reads (the README documents each one; a test checks). */
export const CONFIG_VARIABLES = {
  common: Object.keys(commonSchema.shape),
  ingest: [...Object.keys(ingestSchema.shape), ...PROVIDER_VARIABLES.map((variable) => variable.name)],
  worker: [...Object.keys(workerSchema.shape), ...DESTINATION_VARIABLES],
} as const;

export type CommonConfig = z.infer<typeof commonSchema>;
export type IngestConfig = CommonConfig &
  z.infer<typeof ingestSchema> & {
    /** Every provider's variables, parsed by its descriptor (providers/providers.ts); unset ones absent. */
    readonly providerVariables: Readonly<Record<string, unknown>>;
    /**
     * The destinations the workers forward to, for the admin's page; or what is wrong with their
     * declaration (ingest does not run them: a mistake is shown there and stops the workers, not
     * ingest).
     */
    readonly destinations: readonly Destination[] | string;
  };
export type WorkerConfig = CommonConfig &
  z.infer<typeof workerSchema> & {
    /** Every declared destination, checked (DESTINATION_*, ONCEHOOK_DESTINATIONS_FILE, the sources file). */
    readonly destinations: readonly Destination[];
  };

function parse<T extends z.ZodType>(schema: T, env: Env): z.infer<T> {
  const result = schema.safeParse(withoutEmpty(env));
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => `  ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  throw new ConfigError(`Invalid configuration; fix these environment variables:\n${lines.join('\n')}`);
}

export function loadCommonConfig(env: Env = process.env): CommonConfig {
  return parse(commonSchema.superRefine(checkClusterSlots), env);
}

/** REDIS_CLUSTER_NODES parsed, or what is wrong with it. */
export function parseClusterNodes(value: string): ClusterSeeds | string {
  const entries = commaList(value);
  const nodes: ClusterSeeds['nodes'] = [];
  let shared: { scheme: string; username: string; password: string } | undefined;
  for (const entry of entries) {
    if (!entry.includes('://')) return `"${entry}" must start with redis:// or rediss:// (like redis://${entry})`;
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      return `"${entry}" is not a URL: write each node as redis://host:port (rediss:// for TLS), comma-separated`;
    }
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') return `"${entry}" must start with redis:// or rediss://`;
    if (url.hostname === '' || url.port === '') return `"${entry}" needs a host and a port, like redis://10.0.0.1:6379`;
    if (url.pathname !== '' && url.pathname !== '/') return `"${entry}" names a database (${url.pathname}): a Redis Cluster has only database 0, drop the path`;
    const these = { scheme: url.protocol, username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) };
    if (shared && (shared.scheme !== these.scheme || shared.username !== these.username || shared.password !== these.password)) {
      return 'every node must use the same scheme (redis:// or rediss://) and the same credentials';
    }
    shared = these;
    nodes.push({ host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port) });
  }
  if (!shared) return 'names no node: write redis://host:port,redis://host:port';
  return {
    nodes,
    tls: shared.scheme === 'rediss:',
    ...(shared.username ? { username: shared.username } : {}),
    ...(shared.password ? { password: shared.password } : {}),
  };
}

/** On a Redis Cluster, the queues' keys must fit its slots (queue-names.ts). */
function checkClusterSlots(
  config: { REDIS_CLUSTER_NODES?: ClusterSeeds | undefined; QUEUE_PREFIX: string; QUEUE_SHARDS: number; QUEUE_BACKEND: string },
  ctx: z.RefinementCtx,
): void {
  // mutant: cluster-prefix-unchecked
  if (!config.REDIS_CLUSTER_NODES || config.QUEUE_BACKEND !== 'redis') return;
  const problem = clusterSlotProblem(config.QUEUE_PREFIX, config.QUEUE_SHARDS);
  if (problem) ctx.addIssue({ code: 'custom', path: ['QUEUE_PREFIX'], message: problem });
}

/** Keys must outlive payloads: KEY_RETENTION_DAYS below a payload horizon is refused. */
function checkKeyHorizon(config: CommonConfig, ctx: z.RefinementCtx): void {
  const longest = Math.max(config.RETENTION_DAYS, ...Object.values(config.RETENTION_OVERRIDES));
  // mutant: key-horizon-unchecked
  if (config.KEY_RETENTION_DAYS < longest) {
    ctx.addIssue({
      code: 'custom',
      path: ['KEY_RETENTION_DAYS'],
      message: `is ${config.KEY_RETENTION_DAYS} days, shorter than a payload horizon of ${longest} days (RETENTION_DAYS / RETENTION_OVERRIDES): keys must be kept at least as long as payloads`,
    });
  }
}

/** The providers' variables, each with the schema its descriptor gives it. */
const providerVariablesShape: Record<string, z.ZodType> = Object.fromEntries(PROVIDER_VARIABLES.map((variable) => [variable.name, variable.schema]));

export function loadIngestConfig(env: Env = process.env): IngestConfig {
  const schema = commonSchema.extend({ ...ingestSchema.shape, ...providerVariablesShape }).superRefine((config, ctx) => {
    checkKeyHorizon(config, ctx);
    checkClusterSlots(config, ctx);
    if (config.MAX_INFLIGHT_BODY_BYTES < config.BODY_LIMIT_BYTES) {
      ctx.addIssue({
        code: 'custom',
        path: ['MAX_INFLIGHT_BODY_BYTES'],
        message: `must be at least BODY_LIMIT_BYTES (${config.BODY_LIMIT_BYTES}), or a body of the largest allowed size could never be admitted`,
      });
    }
  });
  const parsed = parse(schema, env) as Record<string, unknown>;
  const providerVariables: Record<string, unknown> = {};
  for (const { name } of PROVIDER_VARIABLES) {
    if (parsed[name] !== undefined) providerVariables[name] = parsed[name];
    delete parsed[name];
  }
  let destinations: readonly Destination[] | string;
  try {
    destinations = loadDestinations(env);
  } catch (error) {
    destinations = (error as Error).message;
  }
  return { ...(parsed as Omit<IngestConfig, 'providerVariables' | 'destinations'>), providerVariables, destinations };
}

export function loadWorkerConfig(env: Env = process.env): WorkerConfig {
  const schema = commonSchema.extend(workerSchema.shape).superRefine((config, ctx) => {
    checkKeyHorizon(config, ctx);
    const scheduled = config.BACKFILL_SCHEDULE.map((entry) => entry.source);
    const twice = scheduled.find((source, i) => scheduled.indexOf(source) !== i);
    if (twice) ctx.addIssue({ code: 'custom', path: ['BACKFILL_SCHEDULE'], message: `schedules source "${twice}" twice: give each source one entry` });
    checkClusterSlots(config, ctx);
    if ((config.FAILURE_NOTIFY_URL === undefined) !== (config.FAILURE_NOTIFY_SECRET === undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: [config.FAILURE_NOTIFY_URL === undefined ? 'FAILURE_NOTIFY_URL' : 'FAILURE_NOTIFY_SECRET'],
        message: 'FAILURE_NOTIFY_URL and FAILURE_NOTIFY_SECRET go together: set both (the receiver verifies the signature) or neither',
      });
    }
    const outside = config.WORKER_QUEUE_SHARDS.filter((shard) => shard >= config.QUEUE_SHARDS);
    // mutant: missing-shard-accepted
    if (outside.length > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['WORKER_QUEUE_SHARDS'],
        message: `shard ${outside.join(', ')} does not exist: QUEUE_SHARDS=${config.QUEUE_SHARDS} has shards 0 to ${config.QUEUE_SHARDS - 1}`,
      });
    }
  });
  return { ...parse(schema, env), destinations: loadDestinations(env) };
}
