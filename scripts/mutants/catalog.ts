/**
 * The curated mutants of Oncehook's guarantees: each one is a small, plausible bug in the code
 * a guarantee rests on, written as an exact search/replace on one file. `npm run mutants`
 * applies each alone to a scratch copy, runs only the test files listed for it, and expects at
 * least one to fail ("killed"). A survivor means the guarantee has no test that notices.
 *
 * Rules:
 * - `search` must occur exactly once in `file` (the runner refuses a stale rule, so a rule
 *   whose code moved is noticed the day it moves, not silently skipped);
 * - `tests` lists the files that are supposed to guard the guarantee, most specific first;
 * - every new guarantee adds its mutants here (and docs/reliability.md shows the table).
 */
export interface Mutant {
  /** Stable short name, used in test comments ("Mutant killed: ..."). */
  id: string;
  /** The guarantee it breaks, in a few words. */
  guarantee: string;
  /** Repository-relative path. */
  file: string;
  search: string;
  replace: string;
  /** Test files (repository-relative) that must kill it. */
  tests: string[];
}

const QUERIES = 'packages/shared/src/db/queries.ts';
const CONTEXT = 'apps/worker/src/handler-context.ts';
const PROCESS = 'apps/worker/src/process-event.ts';

export const MUTANTS: Mutant[] = [
  // ---- the claim ------------------------------------------------------------------------
  {
    id: 'claim-check-then-act',
    guarantee: 'one delivery creates work: the batched claim is atomic',
    file: QUERIES,
    search: `             ON CONFLICT (provider, event_id) DO NOTHING
             RETURNING id, provider, event_id, state, updated_at, attempts`,
    replace: `             WHERE NOT EXISTS (SELECT 1 FROM webhook_events w WHERE w.provider = input.provider AND w.event_id = input.event_id)
             RETURNING id, provider, event_id, state, updated_at, attempts`,
    tests: ['test/claim-race.test.ts', 'test/concurrent-duplicates.test.ts'],
  },
  {
    id: 'claim-single-check-then-act',
    guarantee: 'one delivery creates work: the single claim is atomic',
    file: QUERIES,
    search: `       VALUES ($1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::timestamptz, $7::jsonb)
       ON CONFLICT (provider, event_id) DO NOTHING`,
    replace: `       SELECT $1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::timestamptz, $7::jsonb
        WHERE NOT EXISTS (SELECT 1 FROM webhook_events w WHERE w.provider = $1::text AND w.event_id = $3::text)`,
    tests: ['test/claim-race.test.ts'],
  },
  // ---- the fence ------------------------------------------------------------------------
  {
    id: 'fence-lock-token',
    guarantee: 'a worker that lost its lease commits no step',
    file: QUERIES,
    search: `      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
      FOR NO KEY UPDATE`,
    replace: `      WHERE id = $1::bigint AND $2::uuid IS NOT NULL AND state = 'processing'
      FOR NO KEY UPDATE`,
    tests: ['test/lease-guards.test.ts', 'test/state-machine.test.ts'],
  },
  {
    id: 'fence-done-token',
    guarantee: 'a worker that lost its lease cannot mark the event done',
    file: QUERIES,
    search: `            updated_at = now(), note = coalesce($3::text, note)
      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
    replace: `            updated_at = now(), note = coalesce($3::text, note)
      WHERE id = $1::bigint AND $2::uuid IS NOT NULL AND state = 'processing'`,
    tests: ['test/lease-guards.test.ts', 'test/state-machine.test.ts'],
  },
  {
    id: 'fence-retry-token',
    guarantee: 'a worker that lost its lease cannot send the event back to received',
    file: QUERIES,
    search: `        SET state = 'received', lease_token = NULL, lease_until = NULL,
            last_error = $3::text, updated_at = now()
      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
    replace: `        SET state = 'received', lease_token = NULL, lease_until = NULL,
            last_error = $3::text, updated_at = now()
      WHERE id = $1::bigint AND $2::uuid IS NOT NULL AND state = 'processing'`,
    tests: ['test/lease-guards.test.ts'],
  },
  {
    id: 'fence-failed-token',
    guarantee: 'a worker that lost its lease cannot dead-letter the event',
    file: QUERIES,
    search: `finished_at = now(),
            last_error = $3::text, updated_at = now()
      WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
    replace: `finished_at = now(),
            last_error = $3::text, updated_at = now()
      WHERE id = $1::bigint AND $2::uuid IS NOT NULL AND state = 'processing'`,
    tests: ['test/lease-guards.test.ts'],
  },
  // ---- steps and keys -------------------------------------------------------------------
  {
    id: 'key-includes-attempt',
    guarantee: 'every attempt of an external step sends the same idempotency key',
    file: CONTEXT,
    search: 'idempotencyKeyFor(lease.provider, lease.eventId, name, recorded.generation)',
    replace: 'idempotencyKeyFor(lease.provider, lease.eventId, `${name}#${lease.attempt}`, recorded.generation)',
    tests: ['test/lease-guards.test.ts', 'test/effects.test.ts', 'test/effects-crash.test.ts'],
  },
  {
    id: 'key-ignores-generation',
    guarantee: 'a deliberate replay sends new keys (one new effect), a re-drive the same',
    file: 'packages/shared/src/idempotency-key.ts',
    search: '.update(`${provider}\\0${eventId}\\0${step}\\0${generation}`)',
    replace: '.update(`${provider}\\0${eventId}\\0${step}`)',
    tests: ['test/operations.test.ts'],
  },
  {
    id: 'skip-local-step',
    guarantee: 'a committed local step is not run again',
    file: CONTEXT,
    search: '      if (recorded) {',
    replace: '      if (recorded && false) {',
    tests: ['test/state-machine.test.ts', 'test/operations.test.ts'],
  },
  {
    id: 'skip-external-step',
    guarantee: 'a recorded external step is not called again',
    file: CONTEXT,
    search: '    if (recorded.found) {',
    replace: '    if (recorded.found && false) {',
    tests: ['test/lease-guards.test.ts', 'test/operations.test.ts'],
  },
  // ---- verification ---------------------------------------------------------------------
  {
    id: 'signature-length-only',
    guarantee: 'signatures are compared by content (constant time), not by shape',
    file: 'packages/shared/src/providers/hmac.ts',
    search: 'return a.length === b.length && timingSafeEqual(a, b);',
    replace: 'return a.length === b.length;',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'signature-presence-only',
    guarantee: 'a signature must match, not merely be present (Paddle h1 list)',
    file: 'packages/shared/src/providers/paddle.ts',
    search: 'return h1.some((candidate) => signaturesEqual(expected, candidate));',
    replace: 'return expected.length > 0 && h1.length > 0;',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'verify-before-claim',
    guarantee: 'verify, THEN claim: a forged delivery cannot pre-consume an id',
    file: 'packages/shared/src/providers/stripe.ts',
    search: "      if (!valid) throw new VerificationError(401, 'bad_signature', 'no Stripe-Signature v1 signature matches the body with any configured secret');",
    replace: "      if (!valid) console.warn('bad Stripe signature (mutant: logged, not refused)');",
    tests: ['test/providers.test.ts', 'test/ingest-edge.test.ts'],
  },
  {
    id: 'timestamp-too-old',
    guarantee: 'a stale signed timestamp is refused (replay window)',
    file: 'packages/shared/src/providers/types.ts',
    search: '  if (age > toleranceSeconds) {',
    replace: '  if (age > toleranceSeconds * 1000) {',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'timestamp-in-future',
    guarantee: 'a signed timestamp too far in the future is refused',
    file: 'packages/shared/src/providers/types.ts',
    search: '  if (-age > toleranceSeconds) {',
    replace: '  if (-age > toleranceSeconds * 1000) {',
    tests: ['test/providers.test.ts'],
  },
  // ---- the reconciler -------------------------------------------------------------------
  {
    id: 'reconciler-expired-leases',
    guarantee: 'an event whose worker died is released and run again',
    file: QUERIES,
    search: `         WHERE state = 'processing' AND lease_until < now()
         ORDER BY lease_until`,
    replace: `         WHERE state = 'processing' AND lease_until < now() - interval '1 hour'
         ORDER BY lease_until`,
    tests: ['test/reconciler.test.ts', 'test/metrics.test.ts'],
  },
  {
    id: 'reconciler-stale-received',
    guarantee: 'an event whose job Redis lost is enqueued again',
    file: QUERIES,
    search: `         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'`,
    replace: `         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 hour'`,
    tests: ['test/reconciler.test.ts', 'test/crash-recovery.test.ts', 'test/dependency-loss.test.ts'],
  },
  // ---- leases and attempts --------------------------------------------------------------
  {
    id: 'renewal-off',
    guarantee: 'a long handler keeps its lease (renewal)',
    file: PROCESS,
    search: '    queries.renewLease(pool, row.id, token, settings.leaseMs).then(',
    replace: '    Promise.resolve(true).then(',
    tests: ['test/lease-guards.test.ts'],
  },
  {
    id: 'cap-off',
    guarantee: 'an event that kills its worker every time reaches failed',
    file: PROCESS,
    search: '  if (row.attempts > settings.maxAttempts) {',
    replace: '  if (false) {',
    tests: ['test/lease-guards.test.ts'],
  },
  {
    id: 'cap-last-attempt',
    guarantee: 'the last failed attempt dead-letters the event',
    file: PROCESS,
    search: '    if (permanent || row.attempts >= settings.maxAttempts) {',
    replace: '    if (permanent) {',
    tests: ['test/state-machine.test.ts'],
  },
  {
    id: 'cap-count',
    guarantee: 'every claim counts as an attempt (crashes included)',
    file: QUERIES,
    search: '            attempts = attempts + 1, updated_at = now()',
    replace: '            attempts = attempts, updated_at = now()',
    tests: ['test/state-machine.test.ts', 'test/lease-guards.test.ts'],
  },
  {
    id: 'backoff-zero',
    guarantee: 'failed attempts are retried after a growing, jittered delay',
    file: 'apps/worker/src/worker.ts',
    search: '  const exponential = Math.min(baseMs * 2 ** Math.max(0, failedAttempt - 1), 10 * 60_000);',
    replace: '  return 0;\n  const exponential = Math.min(baseMs * 2 ** Math.max(0, failedAttempt - 1), 10 * 60_000);',
    tests: ['test/lease-guards.test.ts'],
  },
  // ---- the answer at the edge -----------------------------------------------------------
  {
    id: 'ack-before-commit',
    guarantee: 'the 2xx is sent only after the claim committed',
    file: 'apps/ingest/src/receive-webhook.ts',
    search: '    claim = await claims.claim(event);',
    replace:
      "    claim = await Promise.race([claims.claim(event), new Promise<queries.ClaimResult>((resolve) => setImmediate(() => resolve({ outcome: 'new', rowId: -1 })))]);",
    tests: ['test/dependency-loss.test.ts', 'test/ingest-edge.test.ts'],
  },
  {
    id: 'ack-failed-claim',
    guarantee: 'a claim that failed in Postgres is never answered 2xx',
    file: 'apps/ingest/src/claim-batcher.ts',
    search: "      if ('error' in result) waiter.reject(result.error);",
    replace: "      if ('error' in result) waiter.resolve({ outcome: 'duplicate-concurrent' });",
    tests: ['test/dependency-loss.test.ts', 'test/claim-batcher.test.ts'],
  },
  // ---- operator actions -----------------------------------------------------------------
  {
    id: 'redrive-live-lease',
    guarantee: 're-drive never takes an event from a worker holding a live lease',
    file: QUERIES,
    search: "          AND (state IN ('failed', 'received') OR (state = 'processing' AND lease_until < now()))",
    replace: "          AND (state IN ('failed', 'received') OR state = 'processing')",
    tests: ['test/operations.test.ts'],
  },
  {
    id: 'replay-in-flight',
    guarantee: 'replay applies only to finished events, never to one in flight',
    file: QUERIES,
    search: "SELECT id, state FROM webhook_events WHERE id = $1::bigint AND state IN ('done', 'failed') FOR UPDATE",
    replace: "SELECT id, state FROM webhook_events WHERE id = $1::bigint AND state IN ('done', 'failed', 'processing') FOR UPDATE",
    tests: ['test/operations.test.ts'],
  },
];
