/**
 * The curated mutants of Oncehook's guarantees: each one is a small, plausible bug in the code
 * a guarantee rests on, written as an exact search/replace on one file. `npm run mutants`
 * applies each alone to a scratch copy, runs only the test files listed for it, and expects at
 * least one to fail ("killed"). A survivor means the guarantee has no test that notices.
 *
 * Rules:
 * - `search` must occur exactly once in `file` (the runner refuses a stale rule, so a rule
 *   whose code moved is noticed the day it moves, not silently skipped); a bug that spans two
 *   places lists the others in `also` (in the same file unless they name theirs), each held to
 *   the same rule;
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
  /** Further edits, applied after the first, in order (in `file` unless they name another). */
  also?: { file?: string; search: string; replace: string }[];
  /** Test files (repository-relative) that must kill it. */
  tests: string[];
}

const CLAIM_SQL = 'packages/core/src/store/sql/claim.ts';
const RUN_SQL = 'packages/core/src/store/sql/runs.ts';
const RECOVERY_SQL = 'packages/core/src/store/sql/recovery.ts';
const OPERATOR_SQL = 'packages/core/src/store/sql/operators.ts';
const RUN_QUERIES = 'packages/core/src/store/runs.ts';
const RETRY = 'packages/core/src/retry-policy.ts';
const FENCE = 'packages/core/src/steps/run-fence.ts';
const LOCAL_STEP = 'packages/core/src/steps/local-step.ts';
const EXTERNAL_STEP = 'packages/core/src/steps/external-step.ts';
const STEP_RULES = 'packages/core/src/steps/step-rules.ts';
const PROCESS = 'packages/core/src/process-event.ts';
const DISPATCH_BATCHER = 'packages/core/src/dispatch-batcher.ts';

export const MUTANTS: Mutant[] = [
  // ---- the claim ------------------------------------------------------------------------
  {
    id: 'claim-check-then-act',
    guarantee: 'one delivery creates work: the batched claim is atomic',
    file: CLAIM_SQL,
    search: `FROM input CROSS JOIN body_stripes ORDER BY provider, event_id
               ON CONFLICT DO NOTHING`,
    replace: `FROM input
                WHERE NOT EXISTS (SELECT 1 FROM \${EVENTS} w WHERE w.provider = input.provider AND (w.event_id = input.event_id OR w.body_hash = input.body_hash))`,
    tests: ['test/claim-race.test.ts', 'test/concurrent-duplicates.test.ts'],
  },
  {
    id: 'claim-single-check-then-act',
    guarantee: 'one delivery creates work: the single claim is atomic',
    file: CLAIM_SQL,
    search: `         VALUES ($1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::timestamptz, $7::jsonb, $8::bytea, octet_length($5::text)\${origin ? ", 'backfill', $9::text" : ''})
         ON CONFLICT DO NOTHING`,
    replace: `         SELECT $1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::timestamptz, $7::jsonb, $8::bytea, octet_length($5::text)\${origin ? ", 'backfill', $9::text" : ''}
          WHERE NOT EXISTS (SELECT 1 FROM \${EVENTS} w WHERE w.provider = $1::text AND (w.event_id = $3::text OR w.body_hash = $8::bytea))`,
    tests: ['test/claim-race.test.ts'],
  },
  {
    id: 'claim-keys-unordered',
    guarantee: 'two batched claims holding the same keys wait for each other, never deadlock (event ids)',
    file: CLAIM_SQL,
    search: 'FROM input CROSS JOIN body_stripes ORDER BY provider, event_id',
    replace: 'FROM input CROSS JOIN body_stripes ORDER BY ord',
    tests: ['test/core-races.test.ts'],
  },
  {
    id: 'claim-body-stripes-off',
    guarantee: 'two batched claims holding the same body hashes wait for each other, never deadlock',
    file: CLAIM_SQL,
    search: 'SELECT count(pg_advisory_xact_lock(k)) AS n FROM',
    replace: 'SELECT count(k) AS n FROM',
    tests: ['test/core-races.test.ts'],
  },
  {
    id: 'claim-conflict-not-retried',
    guarantee: 'a claim that lost a race (deadlock, a key deleted mid-claim) is run again, not answered as an error',
    file: 'packages/core/src/claim-batch.ts',
    search: '      if (!isClaimConflictError(error) || attempt >= CLAIM_CONFLICT_ATTEMPTS) throw error;',
    replace: '        throw error;',
    tests: ['test/core-races.test.ts'],
  },
  {
    id: 'claim-same-body-in-batch-unmatched',
    guarantee: 'the delivery log counts every delivery of a body claimed under two ids in one batch',
    file: CLAIM_SQL,
    search: '                 FROM input i JOIN inserted x ON x.provider = i.provider AND x.body_hash = i.body_hash AND x.event_id <> i.event_id',
    replace: '                 FROM input i JOIN inserted x ON false',
    tests: ['test/core-races.test.ts'],
  },
  {
    id: 'dispatch-twice',
    guarantee: 'an event is dispatched once: two workers never both create and run its runs',
    file: RUN_SQL,
    search: `          WHERE id = $1::bigint AND state = 'received'
         RETURNING *`,
    replace: `          WHERE id = $1::bigint
         RETURNING *`,
    // round-trips: a dispatch job that carries the type always runs the dispatch statement, so
    // a repeated job for a finished event depends on this guard alone.
    tests: ['test/round-trips.test.ts', 'test/concurrent-duplicates.test.ts', 'test/testkit.test.ts'],
  },
  {
    id: 'dispatch-batch-twice',
    guarantee: 'an event is dispatched once: a batch of dispatches never re-dispatches one that is not `received`',
    file: RUN_SQL,
    search: `          WHERE e.id IN (SELECT id FROM event_args) AND e.state = 'received'`,
    replace: `          WHERE e.id IN (SELECT id FROM event_args)`,
    also: [{ search: `          WHERE e.id = l.id AND e.state = 'received'`, replace: `          WHERE e.id = l.id` }],
    tests: ['test/dispatch-batcher.test.ts'],
  },
  {
    id: 'dispatch-batch-lock-order',
    guarantee: 'two batches of dispatches holding the same events wait for each other instead of deadlocking (events locked in id order first)',
    file: RUN_SQL,
    // Dropping only ORDER BY is equivalent on today's plans (the scan under FOR UPDATE reads the
    // events in id order anyway); without the pre-lock, the UPDATE locks in the arguments' order.
    search: `         SELECT e.id FROM \${EVENTS} e
          WHERE e.id IN (SELECT id FROM event_args) AND e.state = 'received'
          ORDER BY e.id FOR UPDATE`,
    replace: `         SELECT id FROM event_args`,
    tests: ['test/dispatch-batcher.test.ts'],
  },
  {
    id: 'dispatch-batch-repeats-event',
    guarantee: 'an event is dispatched once: one event is never twice in a batch (its runs counted twice, its tokens mixed)',
    file: DISPATCH_BATCHER,
    search: `      if (batch.length < maxBatch && !events.has(w.request.rowId)) {`,
    replace: `      if (batch.length < maxBatch) {`,
    tests: ['test/dispatch-batcher.test.ts'],
  },
  {
    id: 'dispatch-batch-unbounded',
    guarantee: 'a dispatch statement holds at most maxBatch events (its size and its locks bounded)',
    file: DISPATCH_BATCHER,
    search: `      if (batch.length < maxBatch && !events.has(w.request.rowId)) {`,
    replace: `      if (!events.has(w.request.rowId)) {`,
    tests: ['test/dispatch-batcher.test.ts'],
  },
  {
    id: 'dispatch-batch-fails-together',
    guarantee: "one event's failed dispatch fails its own job only, not its batch's",
    file: DISPATCH_BATCHER,
    search: `      if (isDatabaseUnavailableError(error)) {`,
    replace: `      if (isDatabaseUnavailableError(error) || batch.length > 0) {`,
    tests: ['test/dispatch-batcher.test.ts'],
  },
  {
    id: 'dispatch-batch-answers-first',
    guarantee: 'each dispatch of a batch gets its own event and runs (its own lease tokens)',
    file: DISPATCH_BATCHER,
    search: `    for (const w of batch) w.resolve(results.get(w.request.rowId) ?? null);`,
    replace: `    for (const w of batch) w.resolve(results.get(batch[0]!.request.rowId) ?? null);`,
    tests: ['test/dispatch-batcher.test.ts', 'test/round-trips.test.ts'],
  },
  // ---- the fence ------------------------------------------------------------------------
  {
    id: 'fence-lock-token',
    guarantee: 'a worker that lost its lease commits no step',
    file: RUN_SQL,
    search: `        WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
        FOR NO KEY UPDATE`,
    replace: `        WHERE id = $1::bigint AND $2::uuid IS NOT NULL AND state = 'processing'
        FOR NO KEY UPDATE`,
    tests: ['test/lease-guards.test.ts', 'test/state-machine.test.ts'],
  },
  {
    id: 'fence-done-token',
    guarantee: 'a worker that lost its lease cannot mark the run done',
    file: RUN_SQL,
    search: `                updated_at = now(), note = coalesce($3::text, note)
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'`,
    replace: `                updated_at = now(), note = coalesce($3::text, note)
          WHERE id = $1::bigint AND $2::uuid IS NOT NULL AND state = 'processing'`,
    tests: ['test/lease-guards.test.ts', 'test/state-machine.test.ts'],
  },
  {
    id: 'fence-retry-token',
    guarantee: 'a worker that lost its lease cannot send the run back to received',
    file: RUN_SQL,
    search: `          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id
       ), \${ATTEMPT_VERDICT('retry', '$3::text')}`,
    replace: `          WHERE id = $1::bigint AND $2::uuid IS NOT NULL AND state = 'processing'
         RETURNING id
       ), \${ATTEMPT_VERDICT('retry', '$3::text')}`,
    tests: ['test/lease-guards.test.ts'],
  },
  {
    id: 'fence-failed-token',
    guarantee: 'a worker that lost its lease cannot dead-letter the run',
    file: RUN_SQL,
    search: `          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id
       ), \${ATTEMPT_VERDICT('failed'`,
    replace: `          WHERE id = $1::bigint AND $2::uuid IS NOT NULL AND state = 'processing'
         RETURNING id, event_row_id
       ), \${ATTEMPT_VERDICT('failed'`,
    tests: ['test/lease-guards.test.ts'],
  },
  {
    id: 'acquire-steps-in-returning',
    guarantee: 'a takeover that waited on the old owner sees the step it committed (never runs it again)',
    file: RUN_SQL,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: "  const LEASED_RUN_RETURNING = `${runColumns('r')}, row_to_json((SELECT x FROM (SELECT ${eventColumns('e')}) x)) AS event`;",
    replace:
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the replacement is source code containing a template literal
      "  const LEASED_RUN_RETURNING = `${runColumns('r')}, row_to_json((SELECT x FROM (SELECT ${eventColumns('e')}) x)) AS event, (SELECT coalesce(json_agg(json_build_object('runId', s.run_id, 'name', s.name, 'kind', s.kind, 'result', s.result, 'idempotencyKey', s.idempotency_key, 'keySubject', s.key_subject)), '[]') FROM ${STEPS} s WHERE s.run_id = r.id AND s.generation = r.generation) AS steps`;",
    also: [
      {
        file: RUN_QUERIES,
        search: '    const { rows: steps } = await db.query<RecordedStep & { runId: number }>(STEPS_OF_LEASED_RUNS_SQL([rows.map((r) => r.id), token]));',
        replace: '    const steps = rows.flatMap((r) => (r as unknown as { steps: (RecordedStep & { runId: number })[] }).steps);',
      },
      {
        file: RUN_QUERIES,
        search: '    return rows.map(({ event, ...run }) => ({',
        replace: '    return rows.map(({ event, steps: _s, ...run }: RunRow & { event: EventRow; steps?: unknown }) => ({',
      },
    ],
    tests: ['test/core-races.test.ts'],
  },
  {
    id: 'fence-without-begin',
    guarantee: 'the fence and the step it guards are one transaction (BEGIN travels with the fence)',
    file: 'packages/shared/src/db/pool.ts',
    search: "    connection.parse({ text: 'BEGIN' });\n    connection.bind();\n    connection.execute();\n",
    replace: '',
    also: [{ search: "if (all.length !== 2 || all[0]?.command !== 'BEGIN' || !last)", replace: 'if (!last)' }],
    tests: ['test/db-pool.test.ts', 'test/core-races.test.ts'],
  },
  {
    id: 'begin-parse-vouches',
    guarantee: "a pipelined statement whose Parse failed is parsed again (BEGIN's ParseComplete does not mark it prepared)",
    file: 'packages/shared/src/db/pool.ts',
    search:
      "    if (!self.hasBeenParsed(connection)) {\n      connection.parse({ text: self.text, name: self.name });\n      connection.submittedNamedStatements[self.name] = self.text;\n    }\n    connection.parse({ text: 'BEGIN' });\n    connection.bind();\n    connection.execute();\n",
    replace:
      "    const parsed = self.hasBeenParsed(connection);\n    connection.parse({ text: 'BEGIN' });\n    connection.bind();\n    connection.execute();\n    if (!parsed) {\n      connection.parse({ text: self.text, name: self.name });\n      connection.submittedNamedStatements[self.name] = self.text;\n    }\n",
    tests: ['test/db-pool.test.ts'],
  },
  {
    id: 'final-record-lease-lost-silent',
    guarantee: 'a final record that finds the lease lost fails, so the COMMIT sent with it is skipped',
    file: RUN_SQL,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: '       SELECT CASE WHEN EXISTS (SELECT 1 FROM event) THEN 1 ELSE ${S}.lease_lost($1::bigint) END AS recorded`,',
    replace: '       SELECT 1 AS recorded FROM event`,',
    tests: ['test/state-machine.test.ts'],
  },
  {
    id: 'step-lease-not-renewed',
    guarantee: 'a local step that held the run row past a third of the lease renews it before COMMIT',
    file: FENCE,
    search: '  if (Date.now() - fencedAt <= run.leaseMs / 3) return null;',
    replace: '  return null;',
    tests: ['test/core-races.test.ts'],
  },
  {
    id: 'keeper-renews-during-step',
    guarantee: "the lease keeper does not queue renewals behind a local step's row lock",
    file: 'packages/core/src/lease-keeper.ts',
    search: '      if (holdsRunRow()) return;',
    replace: '',
    tests: ['test/core-races.test.ts'],
  },
  {
    id: 'external-call-without-lease',
    guarantee: 'a worker that lost its lease makes no external call',
    file: EXTERNAL_STEP,
    search: `  const renewed = await deps.queries.renewLeaseAtStep(deps.pool, run.runId, run.token, run.leaseMs);
  if (!renewed) throw new LeaseLostError(run.runId);`,
    replace: '  const renewed = { stop: false };',
    tests: ['test/lease-guards.test.ts'],
  },
  {
    id: 'event-state-counters',
    guarantee: 'an event is done exactly when its last run is (per-run counters)',
    file: RUN_SQL,
    search: `          SET runs_pending = e.runs_pending - 1, state = \${EVENT_STATE_AFTER('-1', '0')},`,
    replace: `          SET runs_pending = e.runs_pending, state = \${EVENT_STATE_AFTER('0', '0')},`,
    tests: ['test/state-machine.test.ts', 'test/reconciler.test.ts'],
  },
  // ---- steps and keys -------------------------------------------------------------------
  {
    id: 'key-includes-attempt',
    guarantee: 'every attempt of an external step sends the same idempotency key',
    file: EXTERNAL_STEP,
    search: '    step: name,\n    generation: run.generation,',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the replacement is source code containing a template literal
    replace: '    step: `${name}#${run.attempt}`,\n    generation: run.generation,',
    tests: ['test/lease-guards.test.ts', 'test/effects.test.ts', 'test/effects-crash.test.ts'],
  },
  {
    id: 'key-ignores-generation',
    guarantee: 'a deliberate replay sends new keys (one new effect), a re-drive the same',
    file: 'packages/core/src/idempotency-key.ts',
    search: '[input.handler, input.step, String(input.generation)]',
    replace: '[input.handler, input.step]',
    tests: ['test/operations.test.ts'],
  },
  {
    id: 'key-ignores-handler',
    guarantee: 'two handlers of one event send different keys',
    file: 'packages/core/src/idempotency-key.ts',
    search: '[input.handler, input.step, String(input.generation)]',
    replace: '[input.step, String(input.generation)]',
    tests: ['test/idempotency-key.test.ts'],
  },
  {
    id: 'legacy-key-scheme',
    guarantee: 'runs carried over from before handler names keep their keys',
    file: 'packages/core/src/idempotency-key.ts',
    search: 'input.keyScheme === 1 ?',
    replace: 'input.keyScheme === 3 ?',
    tests: ['test/migrations.test.ts', 'test/idempotency-key.test.ts'],
  },
  {
    id: 'skip-local-step',
    guarantee: 'a committed local step is not run again',
    file: LOCAL_STEP,
    search: `  if (record) {
    // Committed by an earlier attempt`,
    replace: `  if (record && false) {
    // Committed by an earlier attempt`,
    tests: ['test/state-machine.test.ts', 'test/operations.test.ts'],
  },
  {
    id: 'skip-external-step',
    guarantee: 'a recorded external step is not called again',
    file: EXTERNAL_STEP,
    search: `  if (record) {
    scope.log.info({ step: name, kind: 'external' }`,
    replace: `  if (record && false) {
    scope.log.info({ step: name, kind: 'external' }`,
    tests: ['test/lease-guards.test.ts', 'test/operations.test.ts'],
  },
  {
    id: 'step-name-reuse',
    guarantee: 'a step name used twice in one run fails loudly (never one call for two)',
    file: STEP_RULES,
    search: '  if (used.has(name)) {',
    replace: '  if (false) {',
    tests: ['test/sdk.test.ts'],
  },
  {
    id: 'step-result-not-json',
    guarantee: 'a step result that JSON would change is refused, never recorded changed',
    file: 'packages/sdk/src/json.ts',
    search: '  const problem = findNonJson(value);\n  if (problem) {',
    replace: '  const problem = findNonJson(value);\n  if (problem && false) {',
    tests: ['test/sdk.test.ts'],
  },
  {
    id: 'replay-reuses-nothing',
    guarantee: 'a replay of some steps reuses the records of the others (no double local effect)',
    file: OPERATOR_SQL,
    search: '          WHERE s.name = ANY($3::text[])',
    replace: '          WHERE false',
    tests: ['test/operations.test.ts'],
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
    guarantee: 'a signature must match, not merely be present (Stripe v1 and Paddle h1 lists)',
    file: 'packages/shared/src/providers/timestamped-hmac.ts',
    search: 'return signatures.some((candidate) => signaturesEqual(expected, candidate));',
    replace: 'return expected.length > 0 && signatures.length > 0;',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'verify-before-claim',
    guarantee: 'verify, THEN claim: a forged delivery cannot pre-consume an id',
    file: 'packages/shared/src/providers/timestamped-hmac.ts',
    search: "      if (!valid) throw new VerificationError(401, 'bad_signature',",
    replace: "      if (!valid) console.warn('bad Stripe/Paddle signature (mutant: logged, not refused)');\n      if (false) throw new VerificationError(401, 'bad_signature',",
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
    guarantee: 'a run whose worker died is released and run again',
    file: RECOVERY_SQL,
    search: `         WHERE state = 'processing' AND lease_until < now()
         ORDER BY lease_until`,
    replace: `         WHERE state = 'processing' AND lease_until < now() - interval '1 hour'
         ORDER BY lease_until`,
    tests: ['test/reconciler.test.ts', 'test/metrics.test.ts'],
  },
  {
    id: 'reconciler-stale-runs',
    guarantee: 'a run whose retry job Redis lost is enqueued again',
    file: RECOVERY_SQL,
    search: `        SELECT id FROM \${RUNS}
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'`,
    replace: `        SELECT id FROM \${RUNS}
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 hour'`,
    tests: ['test/reconciler.test.ts'],
  },
  {
    id: 'reconciler-stale-events',
    guarantee: 'an event whose dispatch Redis lost (or ingest never sent) is enqueued again',
    file: RECOVERY_SQL,
    search: `        SELECT id FROM \${EVENTS}
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 millisecond'`,
    replace: `        SELECT id FROM \${EVENTS}
         WHERE state = 'received' AND updated_at < now() - $1::int * interval '1 hour'`,
    tests: ['test/reconciler.test.ts', 'test/crash-recovery.test.ts', 'test/dependency-loss.test.ts'],
  },
  // ---- leases and attempts --------------------------------------------------------------
  {
    id: 'renewal-off',
    guarantee: 'a long handler keeps its lease (renewal)',
    file: 'packages/core/src/lease-keeper.ts',
    search: '        .then(() => queries.renewLease(pool, runId, token, leaseMs))',
    replace: '        .then(() => true)',
    tests: ['test/lease-guards.test.ts'],
  },
  {
    id: 'cap-off',
    guarantee: 'a run that kills its worker every time reaches failed',
    file: RETRY,
    search: '  return attempt > policy.maxAttempts;',
    replace: '  return false;',
    tests: ['test/lease-guards.test.ts'],
  },
  {
    id: 'cap-last-attempt',
    guarantee: 'the last failed attempt dead-letters the run',
    file: RETRY,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: '  if (attempt >= policy.maxAttempts) return { retry: false, reason: `attempt ${attempt}/${policy.maxAttempts} failed: ${message}` };',
    replace: '',
    tests: ['test/state-machine.test.ts'],
  },
  {
    id: 'cap-count',
    guarantee: 'every claim counts as an attempt (crashes included)',
    file: RUN_SQL,
    search: `                attempts = r.attempts + 1, updated_at = now(),
                waiting = NULL, waiting_since = NULL, flow_key = $5::text`,
    replace: `                attempts = r.attempts, updated_at = now(),
                waiting = NULL, waiting_since = NULL, flow_key = $5::text`,
    tests: ['test/state-machine.test.ts', 'test/lease-guards.test.ts'],
  },
  {
    id: 'backoff-zero',
    guarantee: 'failed attempts are retried after a growing, jittered delay',
    file: RETRY,
    search: "  const backoff = backoffDelayMs(failedAttempt, { baseMs: policy.backoffMs, capMs: RUN_RETRY_CAP_MS, jitter: 'half' });",
    replace: '  const backoff = 0;',
    tests: ['test/lease-guards.test.ts'],
  },
  // ---- the answer at the edge -----------------------------------------------------------
  {
    id: 'ack-before-commit',
    guarantee: 'the 2xx is sent only after the claim committed',
    file: 'packages/oncehook/src/ingest/receive-webhook.ts',
    search: '    claim = await claims.claim(traceparent ? { ...event, traceparent } : event);',
    replace:
      "    claim = await Promise.race([claims.claim(traceparent ? { ...event, traceparent } : event), new Promise<ClaimResult>((resolve) => setImmediate(() => resolve({ outcome: 'new', rowId: -1 })))]);",
    tests: ['test/dependency-loss.test.ts', 'test/ingest-edge.test.ts'],
  },
  {
    id: 'ack-failed-claim',
    guarantee: 'a claim that failed in Postgres is never answered 2xx',
    file: 'packages/core/src/claim-batch.ts',
    search: "    if ('error' in result) waiter.reject(result.error);",
    replace: "    if ('error' in result) waiter.resolve({ outcome: 'duplicate-concurrent' });",
    tests: ['test/dependency-loss.test.ts', 'test/claim-batcher.test.ts'],
  },
  // ---- hardening: what an attacker on the internet can do (issue 10) -----------------------
  {
    id: 'shopify-body-dedupe-off',
    guarantee: 'a captured Shopify body replayed under a new id or topic is a duplicate',
    file: 'packages/shared/src/providers/shopify.ts',
    search: "        bodyHash: dedupe === 'off' ? null :",
    replace: "        bodyHash: dedupe !== 'off' ? null :",
    tests: ['test/attack-replays.test.ts'],
  },
  {
    id: 'github-body-dedupe-off',
    guarantee: 'a captured GitHub body replayed under a new delivery id is a duplicate',
    file: 'packages/shared/src/providers/github.ts',
    search: '        dedupeOnBody ? bodyHash(request.rawBody) : null,',
    replace: '        null,',
    tests: ['test/attack-replays.test.ts'],
  },
  {
    id: 'github-event-unchecked',
    guarantee: 'a GitHub body sent under another event name is refused',
    file: 'packages/shared/src/providers/github.ts',
    search: '  if (field !== undefined && !(field in parsed.json)) {',
    replace: '  if (field === undefined && !(field in parsed.json)) {',
    tests: ['test/attack-replays.test.ts'],
  },
  {
    id: 'unsigned-header-id-accepted',
    guarantee: 'a generic source taking its id from an unsigned header is refused at start',
    file: 'packages/shared/src/providers/generic-hmac.ts',
    search: "  if ('header' in options.id && !signed(options.id.header) && !options.bodyDedupe) {",
    replace: "  if ('header' in options.id && !signed(options.id.header) && !options.bodyDedupe && false) {",
    tests: ['test/attack-replays.test.ts', 'test/sources-config.test.ts'],
  },
  {
    id: 'domain-key-ignored',
    guarantee: "a step keyed on a domain object sends that object's key for every event about it",
    file: 'packages/core/src/idempotency-key.ts',
    search: '  if (input.subject != null) {',
    replace: '  if (input.subject === "never") {',
    tests: ['test/attack-replays.test.ts', 'test/sdk.test.ts'],
  },
  {
    id: 'csrf-guard-off',
    guarantee: "a page on another site cannot make an operator's browser act on the admin",
    file: 'packages/oncehook/src/ingest/admin/index.ts',
    search: "  admin.use('*', csrfGuard(settings.origins ?? []));",
    replace: '',
    tests: ['test/admin-csrf.test.ts'],
  },
  {
    id: 'precheck-off',
    guarantee: 'a delivery without its signature headers is refused before its body is read',
    file: 'packages/oncehook/src/ingest/edge-guards.ts',
    search: '      source.precheck((header) => c.req.header(header) ?? null, deps.now?.() ?? new Date());',
    replace: '',
    tests: ['test/edge-bounds.alone.test.ts'],
  },
  {
    id: 'inflight-budget-off',
    guarantee: 'the bodies held by deliveries in progress are bounded',
    file: 'packages/oncehook/src/ingest/edge-guards.ts',
    search: '    if (length !== null && inflight + length > settings.maxInflightBodyBytes) {',
    replace: '    if (length !== null && inflight + length > Number.MAX_SAFE_INTEGER) {',
    also: [{ search: "      if (inflight + bytes > settings.maxInflightBodyBytes) return 'over-budget';", replace: '' }],
    tests: ['test/edge-bounds.alone.test.ts', 'test/backpressure.alone.test.ts'],
  },
  {
    id: 'claim-deadline-off',
    guarantee: 'a database that stops answering gets deliveries a 503 within CLAIM_TIMEOUT_MS',
    file: 'packages/core/src/claim-batch.ts',
    search: '  const claimed = await withinDeadline(claiming, Math.max(1, due - deps.now()));',
    replace: '  const claimed = await claiming;',
    tests: ['test/backpressure.alone.test.ts'],
  },
  {
    id: 'claim-circuit-never-opens',
    guarantee: 'after N batches find the database unavailable, claims fail at once instead of waiting out a timeout',
    file: 'packages/core/src/claim-circuit.ts',
    search: '      if (failures < options.failures) return false;',
    replace: '      return false;',
    tests: ['test/claim-circuit.test.ts', 'test/backpressure.alone.test.ts'],
  },
  {
    id: 'poison-fails-batch',
    guarantee: 'one payload Postgres refuses fails alone, not its whole batch',
    file: 'packages/core/src/claim-batch.ts',
    search: '    if (unavailable || events.length === 1) return { results: events.map(() => ({ error })), unavailable };',
    replace: '    return { results: events.map(() => ({ error })), unavailable };',
    tests: ['test/backpressure.alone.test.ts', 'test/claim-batcher.test.ts'],
  },
  {
    id: 'type-label-unbounded',
    guarantee: 'senders cannot create metric series: unknown types count as other',
    file: 'packages/shared/src/type-label.ts',
    search: '    return OTHER_TYPE;',
    replace: '    return type;',
    tests: ['test/metrics.test.ts', 'test/edge-bounds.alone.test.ts'],
  },
  {
    id: 'chunked-body-unlimited',
    guarantee: 'a body without Content-Length is still bounded by BODY_LIMIT_BYTES',
    file: 'packages/oncehook/src/ingest/edge-guards.ts',
    search: "      if (mine.bytes + bytes > settings.bodyLimitBytes) return 'too-large';",
    replace: '',
    tests: ['test/ingest-edge.test.ts'],
  },
  // ---- the queue: relay and shards ------------------------------------------------------
  {
    id: 'relay-never-adds',
    guarantee: 'a committed event is enqueued right after the answer, not only by the reconciler',
    file: 'packages/core/src/enqueue-relay.ts',
    search: "        await withTimeout(enqueueNewEvents(options.queue, jobs), options.enqueueTimeoutMs, 'enqueue');",
    replace: '        await Promise.resolve(jobs);',
    tests: ['test/enqueue-relay.test.ts', 'test/ingest-edge.test.ts', 'test/claim-batcher.test.ts'],
  },
  {
    id: 'relay-unbounded',
    guarantee: 'with Redis down the relay backlog stays within maxPending',
    file: 'packages/core/src/enqueue-relay.ts',
    search: '      const room = Math.max(0, maxPending - pending.length);',
    replace: '      const room = jobs.length;',
    tests: ['test/enqueue-relay.test.ts'],
  },
  {
    id: 'shard-ignores-key',
    guarantee: 'QUEUE_SHARDS spreads events over every shard by their key',
    file: 'packages/core/src/queue.ts',
    search: '  return Number.parseInt(eventKeyDigest(job.provider, job.eventId).slice(0, 8), 16) % shards;',
    replace: '  return 0;',
    tests: ['test/queue-shards.test.ts'],
  },
  {
    id: 'worker-consumes-all-shards',
    guarantee: 'WORKER_QUEUE_SHARDS pins a worker to its shards',
    file: 'packages/core/src/event-worker.ts',
    search: '  const consumed = settings.consumeShards.length > 0 ? settings.consumeShards : names.map((_, i) => i);',
    replace: '  const consumed = names.map((_, i) => i);',
    tests: ['test/queue-shards.test.ts'],
  },
  {
    id: 'dispatch-reads-event',
    guarantee: 'a dispatch job that carries the type needs no event read (round trips per event)',
    file: PROCESS,
    search: '    job.kind !== undefined && job.type !== undefined ? {',
    replace: '    job.kind === undefined && job.type !== undefined ? {',
    tests: ['test/round-trips.test.ts'],
  },
  {
    id: 'dispatch-replanned',
    guarantee: 'the dispatch statement is planned once per connection (its arrays behind a CTE)',
    file: RUN_SQL,
    search: '           FROM ev, args, unnest(args.handlers, args.tokens, args.deferred) AS h(handler, token, deferred),',
    replace: '           FROM ev, args, unnest($2::text[], $3::uuid[], $6::bool[]) AS h(handler, token, deferred),',
    tests: ['test/round-trips.test.ts'],
  },
  {
    id: 'run-job-id-ignores-generation',
    guarantee: "a replayed run's retries are not swallowed by the earlier generation's jobs",
    file: 'packages/core/src/queue.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: "  const generation = job.generation ? `g${job.generation}-` : '';",
    replace: "  const generation = '';",
    tests: ['test/fan-out.test.ts'],
  },
  // ---- ordering helpers -----------------------------------------------------------------
  {
    id: 'ordered-never-stale',
    guarantee: 'ctx.ordered: an older update never overwrites a newer one',
    file: RUN_QUERIES,
    search: '    return { stale: previous !== null && previous > version, previous };',
    replace: '    return { stale: false, previous };',
    tests: ['test/ordering.test.ts', 'test/effects.test.ts'],
  },
  {
    id: 'ordered-version-lowered',
    guarantee: 'ctx.ordered: a stale update does not lower the recorded version',
    file: RUN_SQL,
    search: '          SET version = greatest(v.version, excluded.version), previous_version = v.version,',
    replace: '          SET version = excluded.version, previous_version = v.version,',
    tests: ['test/ordering.test.ts', 'test/core-races.test.ts'],
  },
  {
    id: 'ordered-previous-from-snapshot',
    guarantee: "ctx.ordered's previous is the newest version committed before it, under contention",
    file: RUN_SQL,
    search: `\`INSERT INTO \${VERSIONS} AS v (handler, object_key, version) VALUES ($1::text, $2::text, $3::numeric)`,
    replace: `\`WITH prior AS (SELECT version FROM \${VERSIONS} WHERE handler = $1::text AND object_key = $2::text), up AS (INSERT INTO \${VERSIONS} AS v (handler, object_key, version) VALUES ($1::text, $2::text, $3::numeric)`,
    also: [
      {
        search: '       RETURNING previous_version::text AS previous`,',
        replace: '       RETURNING 1) SELECT (SELECT version::text FROM prior) AS previous FROM up`,',
      },
    ],
    tests: ['test/core-races.test.ts'],
  },
  {
    id: 'object-lock-noop',
    guarantee: 'ctx.lock serialises local steps about one object',
    file: RUN_SQL,
    search: "    LOCK_OBJECT: 'SELECT pg_advisory_xact_lock($1::bigint)',",
    replace: "    LOCK_OBJECT: 'SELECT $1::bigint',",
    tests: ['test/ordering.test.ts'],
  },
  // ---- retention: two horizons ----------------------------------------------------------
  {
    id: 'prune-deletes-key',
    guarantee: 'past the payload horizon the key stays: a late redelivery is a duplicate',
    file: RECOVERY_SQL,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: "      UPDATE ${EVENTS} SET payload = NULL, meta = '{}', note = NULL, pruned_at = now()",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the replacement is source code containing a template literal
    replace: '      DELETE FROM ${EVENTS}',
    tests: ['test/key-horizon.test.ts', 'test/retention.test.ts'],
  },
  {
    id: 'expiry-on-payload-horizon',
    guarantee: 'ingest answers expired only past the key horizon',
    file: 'packages/oncehook/src/ingest/receive-webhook.ts',
    search: '  const horizonDays = deps.settings.retention.keyDays;',
    replace: '  const horizonDays = deps.settings.retention.defaultDays;',
    tests: ['test/key-horizon.test.ts', 'test/retention.test.ts'],
  },
  {
    id: 'key-horizon-unchecked',
    guarantee: 'a key horizon shorter than a payload horizon is refused at start',
    file: 'packages/oncehook/src/config.ts',
    search: '  if (config.KEY_RETENTION_DAYS < longest) {',
    replace: '  if (config.KEY_RETENTION_DAYS < 0) {',
    tests: ['test/key-horizon.test.ts'],
  },
  {
    id: 'retention-window-unchecked',
    guarantee: "a payload horizon shorter than the provider's redelivery window is refused at start",
    file: 'packages/shared/src/providers/sources.ts',
    search: '  if (tooShort.length > 0) throw',
    replace: '  if (tooShort.length < 0) throw',
    tests: ['test/config.test.ts'],
  },
  {
    id: 'pruned-event-replayed',
    guarantee: 'an event whose payload retention deleted cannot run again',
    file: 'packages/core/src/operations.ts',
    search: '  if (event.prunedAt) return { ok: false, rowId, reason: prunedReason(event.prunedAt) };\n  const run = await pickRun(',
    replace: '  const run = await pickRun(',
    tests: ['test/key-horizon.test.ts'],
  },
  // ---- queue shards (config) ------------------------------------------------------------
  {
    id: 'missing-shard-accepted',
    guarantee: 'a worker asked for a shard that does not exist refuses to start',
    file: 'packages/oncehook/src/config.ts',
    search: '    if (outside.length > 0) {',
    replace: '    if (outside.length < 0) {',
    tests: ['test/queue-shards.test.ts'],
  },
  // ---- the handler's payload --------------------------------------------------------------
  {
    id: 'payload-parsed-twice',
    guarantee: "a handler's payload schema runs once per attempt (its transforms too)",
    file: PROCESS,
    search: '  return { handler, payload: parsed.value };',
    replace: '  return { handler, payload: handler.payloadSchema ? handler.payloadSchema.parse(event.payload) : parsed.value };',
    tests: ['test/sdk.test.ts'],
  },
  // ---- tracing --------------------------------------------------------------------------
  {
    id: 'attempt-marker-off',
    guarantee: "a killed worker's attempt still shows in the event's trace",
    file: PROCESS,
    search: "        .startSpan('oncehook.attempt', { attributes: { 'oncehook.handler': run.handler, 'oncehook.attempt': run.attempts } })\n        .end();",
    replace: '',
    tests: ['test/tracing-crash.test.ts'],
  },
  {
    id: 'trace-not-on-event',
    guarantee: "retries and recoveries continue the delivery's trace (it is kept on the event row)",
    file: RUN_SQL,
    search: '                trace_parent = coalesce($5::text, trace_parent)',
    replace: '                trace_parent = trace_parent',
    tests: ['test/tracing.test.ts', 'test/tracing-crash.test.ts'],
  },
  {
    id: 'relay-no-flush-on-shutdown',
    guarantee: 'a stopping ingest adds the jobs of the deliveries it answered before its queue closes',
    file: 'packages/oncehook/src/ingest/build-ingest.ts',
    search: '      await relay.flush(config.ENQUEUE_TIMEOUT_MS * 2);',
    replace: '',
    tests: ['test/crash-recovery.test.ts'],
  },
  // ---- the queue in Postgres (QUEUE_BACKEND=postgres) --------------------------------------
  {
    id: 'pg-queue-ignored',
    guarantee: 'QUEUE_BACKEND=postgres runs without Redis: the queue lives in Postgres',
    file: 'packages/core/src/queue.ts',
    search: "  if (settings.QUEUE_BACKEND === 'redis') return { backend: 'redis', redis: createRedisClient(settings, role) };",
    replace: "  if (settings.QUEUE_BACKEND !== 'nothing') return { backend: 'redis', redis: createRedisClient(settings, role) };",
    tests: ['test/postgres-queue.test.ts'],
  },
  {
    id: 'pg-queue-count-retention',
    guarantee: "on Postgres a completed job deletes only its own row (BullMQ's count retention deadlocks under concurrency)",
    file: 'packages/core/src/queue.ts',
    search: 'export const POSTGRES_EVENT_JOB_OPTIONS = { ...EVENT_JOB_OPTIONS, removeOnComplete: true } as const;',
    replace: 'export const POSTGRES_EVENT_JOB_OPTIONS = { ...EVENT_JOB_OPTIONS } as const;',
    tests: ['test/postgres-queue.test.ts'],
  },
  // ---- Redis Cluster (issue 20) ----------------------------------------------------------
  {
    id: 'cluster-nodes-ignored',
    guarantee: 'REDIS_CLUSTER_NODES connects every process through the Cluster client (MOVED, ASK, failovers followed)',
    file: 'packages/core/src/queue.ts',
    search: '  return settings.REDIS_CLUSTER_NODES ? createRedisCluster(settings.REDIS_CLUSTER_NODES, role) : createRedis(settings.REDIS_URL, role);',
    replace:
      "  return settings.REDIS_CLUSTER_NODES ? createRedis('redis://' + settings.REDIS_CLUSTER_NODES.nodes[0]!.host + ':' + settings.REDIS_CLUSTER_NODES.nodes[0]!.port, role) : createRedis(settings.REDIS_URL, role);",
    tests: ['test/redis-cluster.test.ts'],
  },
  {
    id: 'readiness-ping-only',
    guarantee: "readiness checks that every shard's slot takes a write, not that one node answers PING",
    file: 'packages/core/src/queue.ts',
    search: "  return Promise.all(names.map((name) => redis.set(queueKey(prefix, name, 'oncehook-ready'), String(Date.now()), 'PX', 60_000)));",
    replace: '  return redis.ping();',
    tests: ['test/redis-cluster.test.ts'],
  },
  {
    id: 'one-cluster-node-accepted',
    guarantee: 'a REDIS_URL naming one node of a Redis Cluster is refused at start, naming REDIS_CLUSTER_NODES',
    file: 'packages/core/src/queue.ts',
    search: '  if (clustered && !seed) {',
    replace: '  if (clustered && !seed && Math.random() > 2) {',
    tests: ['test/redis-cluster.test.ts'],
  },
  {
    id: 'cluster-prefix-unchecked',
    guarantee: 'a queue prefix whose keys would cross cluster slots (CROSSSLOT) is refused by the configuration',
    file: 'packages/oncehook/src/config.ts',
    search: "  if (!config.REDIS_CLUSTER_NODES || config.QUEUE_BACKEND !== 'redis') return;",
    replace: '  return;',
    tests: ['test/redis-cluster.test.ts'],
  },
  {
    id: 'reconciler-waits-on-silent-redis',
    guarantee: 'a Redis that stops answering (no reset) cannot stop the reconciler: each add is bounded, a later pass retries',
    file: 'packages/core/src/reconciler.ts',
    search: "        await withTimeout(enqueueEvent(queue, job, { replaceFinished: true }), redisTimeoutMs, 're-enqueue');",
    replace: '        await enqueueEvent(queue, job, { replaceFinished: true });',
    tests: ['test/reconciler.test.ts'],
  },
  {
    id: 'checked-out-client-unlistened',
    guarantee: 'Postgres ending a connection held between statements fails that statement, it does not kill the process',
    file: 'packages/shared/src/db/pool.ts',
    search: "    client.on('error', () => {});",
    replace: '',
    tests: ['test/db-pool.test.ts'],
  },
  // ---- hardening, second round (issue 24) ------------------------------------------------
  {
    id: 'payload-number-limit-off',
    guarantee: 'a number jsonb would print as thousands of digits is refused at the edge',
    file: 'packages/shared/src/payload-limits.ts',
    search: '      if (printed > MAX_NUMBER_CHARS) {',
    replace: '      if (false) {',
    tests: ['test/hardening.test.ts'],
  },
  {
    id: 'payload-depth-limit-off',
    guarantee: 'a payload nested deeper than 128 levels is refused at the edge',
    file: 'packages/shared/src/payload-limits.ts',
    search: '      if (depth > MAX_PAYLOAD_DEPTH) throw',
    replace: '      if (false) throw',
    tests: ['test/hardening.test.ts'],
  },
  {
    id: 'unreadable-payload-returned',
    guarantee: 'a payload stored before the limits that no process can read is never sent to one (no crash loop)',
    file: 'packages/core/src/store/columns.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: '    CASE WHEN ${UNREADABLE_PAYLOAD(alias)} THEN NULL ELSE ${alias}.payload END AS payload,',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the replacement is source code containing a template literal
    replace: '    ${alias}.payload AS payload,',
    tests: ['test/hardening.test.ts'],
  },
  {
    id: 'delivery-log-unbounded',
    guarantee: 'one event delivered thousands of times keeps at most DELIVERY_LOG_ROWS log rows',
    file: CLAIM_SQL,
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: 'generate_series(1, greatest(0, least(dups, ${DELIVERY_LOG_ROWS} - before)::int))',
    replace: 'generate_series(1, dups)',
    tests: ['test/hardening.test.ts'],
  },
  {
    id: 'body-budget-reserves-declared',
    guarantee: 'sockets that declare large bodies and trickle do not hold the body budget (it counts what arrived)',
    file: 'packages/oncehook/src/ingest/edge-guards.ts',
    search: '    const mine = { bytes: 0 };',
    replace: '    const mine = { bytes: length ?? settings.bodyLimitBytes };\n    inflight += mine.bytes;',
    tests: ['test/edge-hardening.alone.test.ts'],
  },
  {
    id: 'precheck-timestamp-off',
    guarantee: 'a signature header with a stale timestamp is refused before the body',
    file: 'packages/shared/src/providers/timestamped-hmac.ts',
    search: '      checkTimestamp(parseTimestampedHmacHeader(format, header).timestamp, now, toleranceSeconds, where);',
    replace: '      void parseTimestampedHmacHeader(format, header);',
    tests: ['test/edge-hardening.alone.test.ts'],
  },
  {
    id: 'pipelined-after-refusal-processed',
    guarantee: 'a delivery pipelined behind an early refusal is not stored (its answer could never be sent)',
    file: 'packages/oncehook/src/ingest/receive-webhook.ts',
    search: "  if (edge.connectionClosing(c)) {\n    log.info('delivery pipelined",
    replace: "  if (false) {\n    log.info('delivery pipelined",
    // The batch path's copy of the check goes too.
    also: [{ search: "  if (edge.connectionClosing(c)) {\n    return answer(\n      'error',", replace: "  if (false) {\n    return answer(\n      'error'," }],
    tests: ['test/hardening.test.ts'],
  },
  {
    id: 'hmac-accepts-non-objects',
    guarantee: 'an hmac source refuses a signed body that is not a JSON object',
    file: 'packages/shared/src/providers/generic-hmac.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: '      const { text, json } = parseJsonObject(request.rawBody, `${name} (hmac source)`);',
    replace: '      const text = request.rawBody.toString();\n      const json = JSON.parse(text) as Record<string, unknown>;',
    tests: ['test/hardening.test.ts'],
  },
  {
    id: 'liveness-ignores-heartbeat',
    guarantee: 'liveness answers 503 when the main event loop has stalled past LIVENESS_STALL_MS',
    file: 'packages/shared/src/liveness.ts',
    search: '  const live = age < workerData.stallMs;',
    replace: '  const live = true;',
    tests: ['test/edge-hardening.alone.test.ts'],
  },
  // ---- packages: what a team installs (issue 22) -----------------------------------------
  {
    id: 'error-brand-per-copy',
    guarantee: "a PermanentError from the handler's own copy of the SDK fails the run at attempt 1 (not retried)",
    file: 'packages/sdk/src/errors.ts',
    search: "const KINDS = Symbol.for('oncehook.error.kinds');",
    replace: "const KINDS = Symbol('oncehook.error.kinds');",
    tests: ['test/user-project.test.ts'],
  },
  {
    id: 'handler-brand-per-copy',
    guarantee: "handlers made with the handler module's own copy of the SDK are loaded by the worker",
    file: 'packages/sdk/src/define-handler.ts',
    search: "const HANDLER_BRAND = Symbol.for('oncehook.handler');",
    replace: "const HANDLER_BRAND = Symbol('oncehook.handler');",
    tests: ['test/user-project.test.ts'],
  },
  {
    id: 'outbound-observers-per-copy',
    guarantee: "the worker counts the outbound calls of the handler module's own copy of the SDK",
    file: 'packages/sdk/src/outbound-client.ts',
    search: "const OBSERVERS = Symbol.for('oncehook.outbound.observers');",
    replace: "const OBSERVERS = Symbol('oncehook.outbound.observers');",
    tests: ['test/user-project.test.ts'],
  },
  {
    id: 'migration-file-skipped',
    guarantee: 'a file in a migrations folder the runner would not apply is an error naming it, never skipped',
    file: 'packages/core/src/migrate.ts',
    search: '  if (unexpected.length > 0) {',
    replace: '  if (unexpected.length < 0) {',
    tests: ['test/cli.test.ts'],
  },
  {
    id: 'handler-retries-ignored',
    guarantee: "a handler's own retries (maxAttempts, backoffMs) override the worker's for its runs",
    file: 'packages/core/src/retry-policy.ts',
    search: '  const own = handler?.retries;',
    replace: '  const own = undefined as Partial<RetryPolicy> | undefined;',
    tests: ['test/state-machine.test.ts'],
  },
  // ---- senders described as data (providers/scheme*.ts) ----------------------------------
  {
    id: 'scheme-hmac-any-digest',
    guarantee: "a table sender's HMAC is compared with the one we computed, not only its length",
    file: 'packages/shared/src/providers/hmac.ts',
    search: '  return bytes !== null && bytes.length === expected.length && timingSafeEqual(bytes, expected);',
    replace: '  return bytes !== null && bytes.length === expected.length;',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'scheme-asymmetric-unchecked',
    guarantee: 'an ed25519 / ECDSA signature is verified with the configured public key',
    file: 'packages/shared/src/providers/scheme-signature.ts',
    search: "        const ok = received !== null && verifySignature(signature.family === 'ed25519' ? null : 'sha256', data, key as KeyObject, received);",
    replace: '        const ok = received !== null;',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'scheme-in-body-signature-unchecked',
    guarantee: "Mailgun's signature inside the body is checked",
    file: 'packages/shared/src/providers/scheme-signature.ts',
    search: '        if (digestMatches(expected, received, signature.encoding)) return secret;',
    replace: '        return secret;',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'scheme-token-unchecked',
    guarantee: "a token sender's token is compared with the configured ones",
    file: 'packages/shared/src/providers/scheme-signature.ts',
    search: '      const token = keys.find(({ secret }) => secretsEqual(secret, received));',
    replace: '      const token = keys[0];',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'scheme-timestamp-unchecked',
    guarantee: "a table sender's signed timestamp is checked against the tolerance after verification",
    file: 'packages/shared/src/providers/scheme-signature.ts',
    search: '    checkTimestamp(parseTimestamp(spec, timestampText, timestampWhere(scheme)), now, tolerance, timestampWhere(scheme));',
    replace: '    parseTimestamp(spec, timestampText, timestampWhere(scheme));',
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'sender-url-unrequired',
    guarantee: 'a sender that signs its URL (HubSpot, Square, Twilio) without the URL configured stops ingest, naming the variable',
    file: 'packages/shared/src/providers/scheme.ts',
    search: '  if (signsUrl && !options.url) {',
    replace: '  if (signsUrl && !options.url && Math.random() > 2) {',
    tests: ['test/sources-config.test.ts'],
  },
  {
    id: 'batch-first-element-only',
    guarantee: 'every element of a batch delivery is claimed on its own',
    file: 'packages/oncehook/src/ingest/receive-webhook.ts',
    search: '    outcomes.push(...(await Promise.allSettled(events.slice(start, start + chunk).map(claimOne))));',
    replace: '    outcomes.push(...(await Promise.allSettled(events.slice(start, start + 1).map(claimOne))));',
    tests: ['test/provider-families.test.ts'],
  },
  {
    id: 'batch-answer-before-commit',
    guarantee: "a batch's 2xx is sent only after every element's claim committed",
    file: 'packages/oncehook/src/ingest/receive-webhook.ts',
    search:
      "    const claim = await claims.claim(traceparent ? { ...event, traceparent } : event);\n    if (claim.outcome !== 'new') await onDuplicate(deps, edge, event.provider, event, claim, now, log);",
    replace:
      "    void claims.claim(traceparent ? { ...event, traceparent } : event);\n    const claim = { outcome: 'new' as const };\n    if (claim.outcome !== 'new') await onDuplicate(deps, edge, event.provider, event, claim, now, log);",
    tests: ['test/provider-families.test.ts'],
  },
  {
    id: 'batch-unchunked',
    guarantee: 'a batch larger than the claim waiting room is claimed in chunks, not refused for ever',
    file: 'packages/oncehook/src/ingest/receive-webhook.ts',
    search: '  const chunk = Math.max(1, Math.min(100, Math.floor(deps.settings.maxWaitingClaims / 4)));',
    replace: '  const chunk = Math.max(1, events.length);',
    tests: ['test/provider-families.test.ts'],
  },
  {
    id: 'handshake-stored-as-event',
    guarantee: 'a handshake (Zoom validation, Twitch verification, Discord PING) is answered and creates no event',
    file: 'packages/shared/src/providers/scheme.ts',
    search: '      if (reply) return { reply };',
    replace: '      if (reply && Math.random() > 2) return { reply };',
    tests: ['test/provider-families.test.ts'],
  },
  {
    id: 'meta-verify-token-unchecked',
    guarantee: "Meta's GET subscription check echoes the challenge only for the configured verify token",
    file: 'packages/shared/src/providers/senders.ts',
    search: "      if (!options.verifyToken || !secretsEqual(options.verifyToken, query.get('hub.verify_token') ?? '')) {",
    replace: '      if (!options.verifyToken) {',
    tests: ['test/provider-families.test.ts'],
  },
  {
    id: 'github-form-unsigned-bytes',
    guarantee: 'a form-encoded GitHub hook is verified on the raw bytes, not on the JSON inside',
    file: 'packages/shared/src/providers/github.ts',
    search: "    requireBodySignature(options.secrets, request.rawBody, 'hex', signature, 'X-Hub-Signature-256');",
    replace: "    requireBodySignature(options.secrets, githubJson(request), 'hex', signature, 'X-Hub-Signature-256');",
    tests: ['test/provider-families.test.ts'],
  },
  {
    id: 'v1a-any-signature',
    guarantee: 'a Standard Webhooks v1a signature is verified with the whpk_ public key',
    file: 'packages/shared/src/providers/standard-webhooks.ts',
    search: '          return signature !== null && signature.length === 64 && publicKeys.some((key) => verifySignature(null, signed(), key, signature));',
    replace: '          return signature !== null && signature.length === 64;',
    tests: ['test/provider-families.test.ts'],
  },
  {
    id: 'signature-base64url-accepted',
    guarantee: 'a base64 signature is accepted only as the text the sender prints (standard base64, padded), not re-encoded as base64url',
    file: 'packages/shared/src/providers/hmac.ts',
    search: `  if (received.length === 0 || received.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(received)) return null;
  const bytes = Buffer.from(received, 'base64');
  return bytes.toString('base64') === received ? bytes : null;`,
    replace: `  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(received)) return null;
  return Buffer.from(received.replace(/-/g, '+').replace(/_/g, '/'), 'base64');`,
    tests: ['test/providers.test.ts'],
  },
  {
    id: 'shopify-two-webhook-ids',
    guarantee: 'a Shopify delivery whose two header sets name two different webhook ids is refused (the id is the dedupe key)',
    file: 'packages/shared/src/providers/shopify.ts',
    search: '  if (ids[0] !== null && ids[1] !== null && ids[0] !== ids[1]) {',
    replace: '  if (ids[0] !== null && ids[1] !== null && ids[0] !== ids[1] && false) {',
    tests: ['test/providers.test.ts', 'test/provider-families.test.ts'],
  },
  // ---- destinations (destinations/) -------------------------------------------------------
  {
    id: 'destination-key-per-attempt',
    guarantee: "a destination's webhook-id is the same on every attempt of one event and generation (a crash after the answer is absorbed by the receiver)",
    file: 'packages/core/src/destinations/destination-handler.ts',
    search: '        const body = envelopeOf(event, idempotencyKey, destination.name);',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the replacement is source code containing a template literal
    replace: '        idempotencyKey = `${idempotencyKey}.${event.attempt}`;\n        const body = envelopeOf(event, idempotencyKey, destination.name);',
    tests: ['test/destinations.test.ts'],
  },
  {
    id: 'destination-signature-without-body',
    guarantee: "a destination call's signature covers its body (the official libraries verify it)",
    file: 'packages/core/src/destinations/forward.ts',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the search text is source code containing a template literal
    search: '  const signed = `${id}.${timestamp}.${body}`;',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the replacement is source code containing a template literal
    replace: '  const signed = `${id}.${timestamp}.`;',
    tests: ['test/destinations.test.ts'],
  },
  {
    id: 'destination-409-dead-letter',
    guarantee: 'a 409 (and 408, 425, 429, 5xx) from a destination is retried, not dead-lettered',
    file: 'packages/core/src/destinations/forward.ts',
    search: '  return status === 408 || status === 409 || status === 425 || status === 429 || status >= 500;',
    replace: '  return status === 408 || status === 425 || status === 429 || status >= 500;',
    tests: ['test/destinations.test.ts'],
  },
  {
    id: 'destination-filter-ignored',
    guarantee: "an event a destination's filter turns away is not sent",
    file: 'packages/core/src/destinations/destination-handler.ts',
    search: '      const skip = filterProblem(destination.filter, event.payload);',
    replace: '      const skip = filterProblem([], event.payload);',
    tests: ['test/destinations.test.ts'],
  },
  // ---- flow control (flow-control.ts, store/flow.ts) --------------------------------------
  {
    id: 'flow-slot-unlocked',
    guarantee: 'two workers at the last slot of a concurrency limit cannot both take it (the one-statement gate queues for the (handler, key) advisory lock before it counts)',
    file: 'packages/core/src/migrations/0014_flow_gate.sql',
    search: '    perform pg_advisory_xact_lock(lock_key);',
    replace: '    perform lock_key;',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'flow-slot-statement-snapshot',
    guarantee:
      "the one-statement gate counts the slots in a snapshot taken after its lock was granted, not in its statement's (taken before it queued): the lease the previous holder committed is counted",
    file: 'packages/core/src/store/sql/runs.ts',
    search: `\${LEASE_ONE_RUN('AND (SELECT in_use FROM gate) < $7::int')}`,
    replace: `\${LEASE_ONE_RUN(\`AND (SELECT count(*) FROM \${RUNS} x WHERE x.handler = $2::text AND x.state = 'processing' AND x.lease_until > now()) + 0 * (SELECT in_use FROM gate) < $7::int\`)}`,
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'flow-slot-untried',
    guarantee: 'two workers at the last slot of a limit with a rate too cannot both take it (that gate tries the advisory lock and joins the line without it)',
    file: 'packages/core/src/migrations/0014_flow_gate.sql',
    search: '  elsif not pg_try_advisory_xact_lock(lock_key) then',
    replace: '  elsif false then',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'flow-concurrency-ignored',
    guarantee: "a run over its handler's concurrency waits instead of starting",
    file: 'packages/core/src/store/sql/runs.ts',
    search: `\${LEASE_ONE_RUN('AND (SELECT in_use FROM gate) < $7::int')}`,
    replace: `\${LEASE_ONE_RUN('AND (SELECT in_use FROM gate) < $7::int + 1000')}`,
    also: [
      {
        file: 'packages/core/src/store/flow.ts',
        search: "          if (inUse === null || inUse >= req.concurrency.limit) reason = 'concurrency';",
        replace: "          if (inUse === null || inUse >= req.concurrency.limit + 1000) reason = 'concurrency';",
      },
    ],
    tests: ['test/flow-control-engine.test.ts', 'test/flow-control.test.ts'],
  },
  {
    id: 'flow-key-ignored',
    guarantee: 'a per-key concurrency limit counts the runs of that key only (other keys run side by side)',
    file: 'packages/core/src/migrations/0014_flow_gate.sql',
    search: '     and (p_flow_key is null or flow_key = p_flow_key);',
    replace: '     and (p_flow_key is null or flow_key is not null);',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'flow-expired-lease-counted',
    guarantee: "a crashed worker's run stops holding its slot when its lease expires",
    file: 'packages/core/src/migrations/0014_flow_gate.sql',
    search: "   where handler = p_handler and state = 'processing' and lease_until > clock_timestamp()",
    replace: "   where handler = p_handler and state = 'processing'",
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'flow-rate-unchecked',
    guarantee: 'runs start no faster than their rate limit: a full window makes the run wait',
    file: 'packages/core/src/store/sql/flow.ts',
    search: '        WHERE excluded.window_start > w.window_start OR w.started < $4::int',
    replace: '        WHERE excluded.window_start > w.window_start OR w.started < $4::int + 1000000',
    tests: ['test/flow-control-engine.test.ts', 'test/flow-control.test.ts'],
  },
  {
    id: 'flow-wait-unfenced',
    guarantee: 'a stale job of a waiting run schedules nothing (one chain of jobs per waiting run)',
    file: 'packages/core/src/store/sql/flow.ts',
    search: '          AND ($5::int IS NULL OR r.waits = $5::int)',
    replace: '          AND ($5::int IS NULL OR r.waits >= 0)',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'flow-no-hand-over',
    guarantee: 'a run that frees a slot wakes the run waiting longest for it (waiters have no job of their own)',
    file: 'packages/core/src/process-event.ts',
    search: '  if (request.concurrency) await handOver(deps, handler.name, request.concurrency.key, follow);',
    replace: '  void handOver;',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'flow-contended-no-second-look',
    guarantee:
      'a run that waits for a slot (counted full, or joined the line while the lock was busy) looks at the slots again after its commit, so a slot freed meanwhile is not lost',
    file: 'packages/core/src/process-event.ts',
    search: '      if ((await queries.slotsInUse(pool, handler.name, request.concurrency.key)) < request.concurrency.limit) await handOver(',
    replace: '      if ((await queries.slotsInUse(pool, handler.name, request.concurrency.key)) < 0) await handOver(',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'lease-clock-off',
    guarantee: 'a run whose lease can no longer be renewed abandons its calls before the lease runs out (a limit holds at the downstream)',
    file: 'packages/core/src/lease-clock.ts',
    search: '    options.onExpiring();',
    replace: '    void options.onExpiring;',
    tests: ['test/flow-control-engine.test.ts', 'test/postgres-outage.test.ts'],
  },
  {
    id: 'slot-waiters-requeued',
    guarantee: 'the reconciler leaves runs waiting for a taken slot alone (no re-enqueue, no write)',
    file: 'packages/core/src/store/sql/recovery.ts',
    search: "           AND waiting IS DISTINCT FROM 'concurrency'",
    replace: '           AND true',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'stalled-slots-not-woken',
    guarantee: 'the reconciler wakes the waiters of a group with a free slot whose wake-up was lost',
    file: 'packages/core/src/store/sql/flow.ts',
    search: '                                 ORDER BY x.waiting_since LIMIT greatest(f.n, 0) FOR UPDATE SKIP LOCKED) w',
    replace: '                                 ORDER BY x.waiting_since LIMIT 0 FOR UPDATE SKIP LOCKED) w',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'stalled-slots-full-woken',
    guarantee: 'the reconciler wakes no waiter of a group whose slots are all taken',
    file: 'packages/core/src/store/sql/flow.ts',
    search: '                                 ORDER BY x.waiting_since LIMIT greatest(f.n, 0) FOR UPDATE SKIP LOCKED) w',
    replace: '                                 ORDER BY x.waiting_since LIMIT greatest(f.n, 0) + 100 FOR UPDATE SKIP LOCKED) w',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'pause-unchecked-lease',
    guarantee: "a paused handler's run is not leased by its job (a retry, a recovery, a resume of another pause)",
    file: 'packages/core/src/store/sql/runs.ts',
    search: `            AND NOT \${PAUSED(PAUSES, 'r', 'e')} \${extra}`,
    replace: `            \${extra}`,
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'pause-unchecked-dispatch',
    guarantee: "a paused handler's runs are created waiting by the dispatch, not leased",
    file: 'packages/core/src/store/sql/runs.ts',
    search: `                LATERAL (SELECT \${PAUSED(PAUSES, 'h', 'ev')} AS paused) p`,
    replace: '                LATERAL (SELECT false AS paused) p',
    tests: ['test/flow-control-engine.test.ts', 'test/flow-control.test.ts'],
  },
  {
    id: 'pause-unchecked-batch-dispatch',
    guarantee: "a paused handler's runs are created waiting by a batch of dispatches too, not leased",
    file: 'packages/core/src/store/sql/runs.ts',
    search: `                LATERAL (SELECT \${PAUSED(PAUSES, 'ra', 'ev')} AS paused) p`,
    replace: '                LATERAL (SELECT false AS paused) p',
    tests: ['test/dispatch-batcher.test.ts'],
  },
  {
    id: 'paused-runs-requeued',
    guarantee: 'the reconciler leaves paused runs alone (no re-enqueue, no churn)',
    file: 'packages/core/src/store/sql/recovery.ts',
    search: "           AND waiting IS DISTINCT FROM 'paused'",
    replace: '           AND true',
    tests: ['test/flow-control-engine.test.ts', 'test/flow-control.test.ts'],
  },
  {
    id: 'breaker-never-trips',
    guarantee: 'a circuit breaker pauses its handler after N failed attempts in a row',
    file: 'packages/core/src/process-event.ts',
    search: '      if (failures >= after) {',
    replace: '      if (failures >= after * 1000) {',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'priority-ignored',
    guarantee: "a lower-priority handler's runs wait behind better ones (prioritized jobs) instead of running inside their dispatch",
    file: 'packages/core/src/process-event.ts',
    search: '  const special = (h: Handler) => isGated(h) || priorityLevel(h) > best;',
    replace: '  const special = (h: Handler) => isGated(h) || (priorityLevel(h) > best && false);',
    tests: ['test/flow-control.test.ts'],
  },
  {
    id: 'stop-now-ignored-external',
    guarantee: 'pause --now stops a run in progress before its next external call',
    file: EXTERNAL_STEP,
    search: '  if (renewed.stop) throw new RunStoppedError(run.runId);',
    replace: '  void renewed.stop;',
    tests: ['test/flow-control-engine.test.ts'],
  },
  {
    id: 'stop-now-ignored-local',
    guarantee: 'pause --now stops a run in progress before its next local step',
    file: FENCE,
    search: '      if (fence.stop) throw new RunStoppedError(run.runId);',
    replace: '      void fence.stop;',
    tests: ['test/flow-control-engine.test.ts'],
  },
  // ---- the operator console (issue 33) -----------------------------------------------------
  {
    id: 'failure-shape-not-written',
    guarantee: 'a run that fails for good joins its failure group (its error shape is written with its error)',
    file: RUN_SQL,
    search: `                last_error = $3::text, error_shape = \${S}.error_shape($3::text), updated_at = now()
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id`,
    replace: `                last_error = $3::text, updated_at = now()
          WHERE id = $1::bigint AND lease_token = $2::uuid AND state = 'processing'
         RETURNING id, event_row_id`,
    tests: ['test/failure-notify.test.ts'],
  },
  {
    id: 'notified-without-delivery',
    guarantee: "a failure group's opening is notified until a receiver answers 2xx, not marked notified on a refusal",
    file: OPERATOR_SQL,
    search: 'notified_at = CASE WHEN $4::boolean THEN now() END',
    replace: 'notified_at = now()',
    tests: ['test/failure-notify.test.ts'],
  },
  {
    id: 'time-range-ids-inverted',
    guarantee: 'a time range finds every event received in it (its row ids found by a binary search)',
    file: 'packages/core/src/store/operators.ts',
    search: '      if (row === undefined || row.receivedAt >= at) hi = mid;',
    replace: '      if (row === undefined || row.receivedAt <= at) hi = mid;',
    tests: ['test/admin-console.test.ts'],
  },
  {
    id: 'search-page-overlap',
    guarantee: 'keyset pages of a search neither repeat nor skip an event',
    file: OPERATOR_SQL,
    search: '          AND ($15::bigint IS NULL OR e.id < $15::bigint)',
    replace: '          AND ($15::bigint IS NULL OR e.id <= $15::bigint)',
    tests: ['test/admin-console.test.ts'],
  },
  // ---- operator actions -----------------------------------------------------------------
  {
    id: 'redrive-live-lease',
    guarantee: 're-drive never takes a run from a worker holding a live lease',
    file: OPERATOR_SQL,
    search: "            AND (state IN ('failed', 'received') OR (state = 'processing' AND lease_until < now()))",
    replace: "            AND (state IN ('failed', 'received') OR state = 'processing')",
    tests: ['test/operations.test.ts'],
  },
  {
    id: 'replay-in-flight',
    guarantee: 'replay applies only to finished runs, never to one in flight',
    file: OPERATOR_SQL,
    search: "          WHERE event_row_id = $1::bigint AND handler = $2::text AND state IN ('done', 'failed')",
    replace: "          WHERE event_row_id = $1::bigint AND handler = $2::text AND state IN ('done', 'failed', 'processing')",
    tests: ['test/operations.test.ts'],
  },
  // ---- backfill (backfill.ts, the claim's origin) ----------------------------------------
  {
    id: 'backfill-claim-bypasses-key',
    guarantee: "a backfilled event is claimed on the delivery's own key: one already delivered (or backfilled) is a duplicate, never a second event",
    file: 'packages/core/src/backfill.ts',
    search: '    const claim = await queries.claimEvent(pool, event, { backfill: { detail: options.detail } });',
    replace: "    const claim = await queries.claimEvent(pool, { ...event, eventId: event.eventId + ':backfill' }, { backfill: { detail: options.detail } });",
    tests: ['test/backfill.test.ts'],
  },
  {
    id: 'backfill-origin-not-recorded',
    guarantee: 'an event found only by a backfill is recorded with origin backfill and which backfill fetched it',
    file: CLAIM_SQL,
    search: `\${origin ? ", 'backfill', $9::text" : ''}`,
    replace: `\${origin ? ", 'delivery', $9::text" : ''}`,
    tests: ['test/backfill.test.ts'],
  },
  {
    id: 'backfill-dry-run-claims',
    guarantee: 'a dry run of a backfill claims nothing',
    file: 'packages/core/src/backfill.ts',
    search: '    if (options.dryRun) {',
    replace: '    if (options.dryRun && false) {',
    tests: ['test/backfill.test.ts'],
  },
  {
    id: 'backfill-schedule-every-process',
    guarantee: "one process at a time runs a source's scheduled backfill pass, once per interval fleet-wide (its row's lease)",
    file: 'packages/core/src/store/sql/backfill-schedule.ts',
    search: '        WHERE source = $1::text AND next_at <= now() AND (leased_until IS NULL OR leased_until < now())',
    replace: '        WHERE source = $1::text',
    tests: ['test/backfill.test.ts'],
  },
  {
    id: 'github-backfill-lists-delivered',
    guarantee: 'the GitHub backfill lists only the deliveries GitHub could not make (not answered 2xx)',
    file: 'packages/shared/src/providers/github-backfill.ts',
    search: '        if (ok && !query.all) continue;',
    replace: '        if (ok && !query.all && false) continue;',
    tests: ['test/backfill.test.ts'],
  },
  {
    id: 'github-backfill-ignores-redelivery',
    guarantee: 'a failed GitHub delivery whose GUID was later redelivered successfully is not listed as undelivered',
    file: 'packages/shared/src/providers/github-backfill.ts',
    search: '        seen.add(delivery.guid);',
    replace: '        if (!ok) seen.add(delivery.guid);',
    tests: ['test/backfill.test.ts'],
  },
  {
    id: 'paddle-backfill-lists-delivered',
    guarantee: 'the Paddle backfill lists only the notifications Paddle could not deliver',
    file: 'packages/shared/src/providers/paddle-backfill.ts',
    search: "    if (!query.all) first.searchParams.set('status', 'failed,needs_retry,not_attempted');",
    replace: "    if (!query.all) first.searchParams.set('status', 'failed,needs_retry,not_attempted,delivered');",
    tests: ['test/backfill.test.ts'],
  },
  // Issue 63: the third round's defences (docs/security.md, the third round).
  {
    id: 'admin-shares-ingest-pool',
    guarantee: "the admin's queries never take a delivery's connection",
    file: 'packages/oncehook/src/ingest/app.ts',
    search: 'mountAdmin(app, { ...deps, pool: deps.adminPool }, deps.admin)',
    replace: 'mountAdmin(app, { ...deps, pool: deps.pool }, deps.admin)',
    tests: ['test/admin-budget.test.ts'],
  },
  {
    id: 'admin-searches-uncapped',
    guarantee: 'one admin user runs at most ADMIN_SEARCHES_PER_USER searches at once',
    file: 'packages/oncehook/src/ingest/admin/budget.ts',
    search: '      if (now >= perUser) return null;',
    replace: '',
    tests: ['test/admin-budget.test.ts'],
  },
  {
    id: 'admin-search-not-cancelled',
    guarantee: 'a search whose client went away is cancelled in Postgres, not left to its timeouts',
    file: 'packages/core/src/operations.ts',
    search: '      const unwatch = cancelOnAbort(tx, signal);',
    replace: '      const unwatch = () => {};',
    tests: ['test/admin-budget.test.ts'],
  },
  {
    id: 'payload-search-unbounded',
    guarantee: 'a payload search is bounded by a time range',
    file: 'packages/oncehook/src/event-search.ts',
    search: '    if (filter.payload && !filter.since)',
    replace: '    if (filter.payload && !filter.since && false)',
    tests: ['test/admin-budget.test.ts'],
  },
  {
    id: 'admin-busy-is-500',
    guarantee: 'an admin that cannot get a connection answers 503 naming why, never 500',
    file: 'packages/oncehook/src/ingest/admin/budget.ts',
    search: '  if (isPoolWait(error))',
    replace: '  if (isPoolWait(error) && false)',
    tests: ['test/admin-budget.test.ts'],
  },
  {
    id: 'claim-deadline-from-batch-start',
    guarantee: "a delivery's deadline covers its wait for a batch and a connection",
    file: 'packages/core/src/claim-batcher.ts',
    search: '        armSweep();\n      });',
    replace: '      });',
    tests: ['test/claim-batcher.test.ts'],
  },
  {
    id: 'login-unthrottled',
    guarantee: 'failed admin logins are throttled per client address',
    file: 'packages/oncehook/src/ingest/admin/auth.ts',
    search: '      return w && w.failures >= perMinute ?',
    replace: '      return w && false ?',
    tests: ['test/admin-budget.test.ts'],
  },
  {
    id: 'outbound-ip-literal-unchecked',
    guarantee: 'an address written in an outbound URL is checked before connecting',
    file: 'packages/shared/src/outbound/outbound-http.ts',
    search: '    if (isIP(options.hostname)) {',
    replace: '    if (false) {',
    tests: ['test/outbound-guard.test.ts'],
  },
  {
    id: 'outbound-lookup-unchecked',
    guarantee: 'every address a name resolves to is checked where the connection is made (no rebinding)',
    file: 'packages/shared/src/outbound/outbound-http.ts',
    search: "          if (problem) return callback(new OutboundRefusedError('address', problem), '');",
    replace: '',
    tests: ['test/outbound-guard.test.ts'],
  },
  {
    id: 'outbound-embedded-ipv4-ignored',
    guarantee: 'an IPv4 address carried in an IPv6 one (mapped, NAT64, 6to4, Teredo) is checked',
    file: 'packages/shared/src/outbound/address-guard.ts',
    search: "  if (parsed.kind() === 'ipv6') {",
    replace: '  if (false) {',
    tests: ['test/outbound-guard.test.ts'],
  },
  {
    id: 'redirect-post-becomes-get',
    guarantee: 'a 301/302/303 to a POST is refused, not followed as a GET',
    file: 'packages/shared/src/outbound/outbound-http.ts',
    search: "    if (response.status !== 307 && response.status !== 308 && method !== 'GET' && method !== 'HEAD')",
    replace: '    if (false)',
    tests: ['test/outbound-guard.test.ts'],
  },
  {
    id: 'redirect-keeps-secret-headers',
    guarantee: "a redirect that leaves the origin drops the caller's secret headers",
    file: 'packages/shared/src/outbound/outbound-http.ts',
    search: '    if (next.origin !== current.origin) headers =',
    replace: '    if (false) headers =',
    tests: ['test/outbound-guard.test.ts'],
  },
  {
    id: 'redirect-unbounded',
    guarantee: 'at most 5 redirect hops are followed',
    file: 'packages/shared/src/outbound/outbound-http.ts',
    search: '    if (hop >= maxRedirects)',
    replace: '    if (hop >= 100)',
    tests: ['test/outbound-guard.test.ts'],
  },
  {
    id: 'header-crlf-accepted',
    guarantee: 'a configured header value with a line break is refused at configuration, naming the field',
    file: 'packages/shared/src/outbound/secrets.ts',
    search: "  if (/[\\r\\n]/.test(value)) return 'contains a line break (CR or LF); a header value is one line';",
    replace: '',
    tests: ['test/destinations.test.ts'],
  },
  {
    id: 'destination-excerpt-unredacted',
    guarantee: "a receiver that echoes its request cannot put a destination's header values in the run's record",
    file: 'packages/core/src/destinations/forward.ts',
    search: '    const excerpt = redactSecrets(excerptOf(answer), secrets);',
    replace: '    const excerpt = excerptOf(answer);',
    tests: ['test/secrets-canary.test.ts'],
  },
  {
    id: 'backfill-error-keeps-key',
    guarantee: "an API that echoes its key in an error cannot put it in the CLI's output or a pass's record",
    file: 'packages/shared/src/providers/backfill.ts',
    search: '        if (error instanceof Error) error.message = redactSecrets(error.message, secrets);',
    replace: '',
    tests: ['test/secrets-canary.test.ts'],
  },
  {
    id: 'backfill-follows-any-origin',
    guarantee: "a provider's next-page link is followed only on its own origin (the key stays with the API)",
    file: 'packages/shared/src/providers/backfill.ts',
    search: '    if (url.origin !== this.origin)',
    replace: '    if (false)',
    also: [{ search: '    const guarded = outboundFetchFor({ allowedOrigins: [this.origin] });', replace: '    const guarded = outboundFetchFor({});' }],
    tests: ['test/backfill-bounds.test.ts'],
  },
  {
    id: 'backfill-repeated-cursor',
    guarantee: 'a page cursor the API sends twice stops the listing',
    file: 'packages/shared/src/providers/backfill.ts',
    search: '      if (this.#cursors.has(cursor)) throw',
    replace: '      if (false) throw',
    tests: ['test/backfill-bounds.test.ts'],
  },
  {
    id: 'backfill-pages-unbounded',
    guarantee: 'a listing stops at its page cap',
    file: 'packages/shared/src/providers/backfill.ts',
    search: '    if (this.pages >= this.limits.maxPages)',
    replace: '    if (false)',
    tests: ['test/backfill-bounds.test.ts'],
  },
  {
    id: 'backfill-page-bytes-unbounded',
    guarantee: "one answer of a provider's API is bounded",
    file: 'packages/shared/src/providers/backfill.ts',
    search: '            if (seen > room) controller.error(',
    replace: '            if (false) controller.error(',
    also: [{ search: '      if (Number.isFinite(declared) && declared > room) {', replace: '      if (false) {' }],
    tests: ['test/backfill-bounds.test.ts'],
  },
  {
    id: 'notify-holds-the-pass',
    guarantee: "failure notifications never hold the reconciler's pass",
    file: 'packages/core/src/reconciler.ts',
    search: '    notifier?.wake();',
    replace: '    await notifier?.runOnce();',
    tests: ['test/failure-notify.test.ts'],
  },
  {
    id: 'notify-one-at-a-time',
    guarantee: 'due notifications are sent at once, not one after another',
    file: 'packages/core/src/failure-groups.ts',
    search: '  const delivered = await Promise.all(\n    due.map(async (group) => {',
    replace: '  const delivered: boolean[] = [];\n  for (const group of due) delivered.push(await (async () => {',
    also: [{ search: '      return ok;\n    }),\n  );', replace: '      return ok;\n    })());' }],
    tests: ['test/failure-notify.test.ts'],
  },
  {
    id: 'worker-type-label-unbounded',
    guarantee: "the worker's metrics have no series per type a sender writes",
    file: 'packages/core/src/event-worker.ts',
    search: '    const labels = { provider: outcome.provider, type: typeLabel(run.handler, run.type),',
    replace: '    const labels = { provider: outcome.provider, type: run.type,',
    tests: ['test/metrics.test.ts'],
  },
  {
    id: 'cli-prints-raw',
    guarantee: "what the CLI prints cannot drive the operator's terminal",
    file: 'packages/oncehook/src/cli/terminal.ts',
    search: '  return text.replace(UNSAFE,',
    replace: '  return text || text.replace(UNSAFE,',
    tests: ['test/cli-output.test.ts'],
  },
];
