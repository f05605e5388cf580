/**
 * checkHandler: puts one handler through what Oncehook exists to survive, on a real Postgres,
 * through the real state machine (the worker's processJob, real leases and fences), and
 * reports what went wrong.
 *
 *   const report = await checkHandler(refunds, { type: 'charge.refunded', payload }, {
 *     setup: (db) => db.query('CREATE TABLE accounts (...)'),
 *     state: async (db) => (await db.query('SELECT * FROM accounts ORDER BY id')).rows,
 *   });
 *   expect(report.problems).toEqual([]);
 *
 * Scenarios, each on a fresh database cloned from a template (Oncehook's schema + `setup`):
 * 1. a clean run: the reference (its steps, the keys they sent, the final `state`);
 * 2. for every step boundary of the clean run in turn, a crash exactly there, then resumed
 *    as the next worker would (a new attempt, the lease taken over):
 *      - an external step: after its call returned, before its record commits;
 *      - a local step: before its transaction commits (its writes roll back);
 * 3. concurrent duplicate deliveries: the event claimed N times at once, and N workers
 *    dispatching it at once.
 * Problems reported: an external step called again with a DIFFERENT key (or a request that
 * carries no key at all, or not the one it was given), a local step committed twice, a step
 * the clean run committed that a resumed run skipped (a different path), the event not ending
 * `done`, a final `state` that differs from the clean run's, a handler that caught the
 * simulated crash and went on.
 *
 * Requests are seen by wrapping `globalThis.fetch` for the duration of the check (Oncehook's
 * createOutboundClient and most HTTP clients use it) and attributed to the step they run in.
 * They go where the handler sends them: point its APIs at fakes that honour idempotency keys
 * (the way the real ones do), not at production.
 */
import { randomBytes } from 'node:crypto';
import { createLogger, createPool, DEFAULT_SCHEMA, type Faults, type Logger, type Pool, type VerifiedEvent } from '@oncehook/shared';
import {
  createEngine,
  createQueries,
  currentStep,
  HandlerRegistry,
  migrate,
  processJob,
  subscribeHooks,
  trackCurrentStep,
  type CurrentStep,
  type EngineHooks,
  type Queries,
} from '@oncehook/core';
import type { Handler } from '@oncehook/sdk';
import { databasePrefix, openScratchDatabases, type ScratchDatabases, serverUrl } from './scratch-databases.js';

export interface CheckEvent {
  type: string;
  payload: unknown;
  /** The provider's event id (default: one per check, the same in every scenario, as redeliveries are). */
  eventId?: string;
  /** The source it arrives on (default: the handler's source). */
  source?: string;
  /** Default: the handler's kind, or its source. */
  kind?: string;
  signedAt?: Date | null;
  meta?: Record<string, string>;
}

export interface CheckOptions {
  /**
   * The Postgres server to create scratch databases on: any URL of it (the database part is
   * ignored). Default: ONCEHOOK_CHECK_DATABASE_URL, else DATABASE_URL, else
   * postgres://postgres@127.0.0.1:5432.
   */
  databaseUrl?: string;
  /** Creates the handler's own tables; run once, in the template every scenario is cloned from. */
  setup?: (db: Pool) => Promise<unknown>;
  /** Reads the domain state the handler changes; every scenario must end with the clean run's. */
  state?: (db: Pool) => Promise<unknown>;
  /** Concurrent duplicate deliveries in the concurrency scenario (default 5; 0 skips it). */
  duplicates?: number;
  /** Steps whose APIs take no idempotency key (at-least-once by design): not reported for it. */
  keylessSteps?: string[];
  /** Oncehook's schema in the scratch databases (default `oncehook`). */
  schema?: string;
  /** Keep the scratch databases for a look (their names are in the report; drop them yourself). */
  keepDatabases?: boolean;
  /**
   * How the scratch databases' names begin (default ONCEHOOK_CHECK_DATABASE_PREFIX, else
   * `oncehook_check_`): give each team or CI job on a shared server its own. A check also drops
   * the leftovers of killed checks with its prefix that are over an hour old.
   */
  databasePrefix?: string;
}

export interface ScenarioReport {
  name: string;
  database: string;
  attempts: number;
  eventState: string;
  /** Steps as they committed, in order. */
  committed: string[];
  /** Every request a step made: the step, the attempt, the key it was given and the key it sent. */
  requests: { step: string; attempt: number; method: string; url: string; given: string | null; sent: string | null }[];
  problems: string[];
}

export interface CheckReport {
  ok: boolean;
  problems: string[];
  /** The boundaries crashed at, in order: "after <step> returned" / "before <step> commits". */
  boundaries: string[];
  scenarios: ScenarioReport[];
  /** Every scratch database the check created (dropped when it ended, unless kept). */
  databases: string[];
  /** Leftovers of earlier checks that were killed mid-way, older than an hour, dropped at the start. */
  removedLeftovers: string[];
}

/** What the check throws at a boundary: to the handler it looks like any failure mid-step. */
export class SimulatedCrash extends Error {
  override name = 'SimulatedCrash';
}

interface Boundary {
  label: string;
  point: 'worker.after-external-call' | 'worker.step-before-commit';
  step: string;
}

interface Request {
  step: CurrentStep;
  method: string;
  url: string;
  /** The Idempotency-Key header, or null. */
  header: string | null;
  body: string;
}

/** Wraps fetch for the duration of the check, attributing each request to the step it runs in. */
function captureRequests(requests: Request[]): () => void {
  const original = globalThis.fetch;
  globalThis.fetch = async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    const step = currentStep();
    if (step) {
      const request = input instanceof Request ? input : null;
      const headers = new Headers(init?.headers ?? request?.headers);
      const body = typeof init?.body === 'string' ? init.body : '';
      requests.push({ step, method: init?.method ?? request?.method ?? 'GET', url: String(request?.url ?? input), header: headers.get('idempotency-key'), body });
    }
    return original(input, init);
  };
  return () => {
    globalThis.fetch = original;
  };
}

/**
 * Checks run one at a time in a process, whoever starts them: each wraps the global fetch for
 * its duration, and two at once would see each other's requests.
 */
let queue: Promise<unknown> = Promise.resolve();

export function checkHandler(handler: Handler, event: CheckEvent, options: CheckOptions = {}): Promise<CheckReport> {
  const result = queue.then(() => runCheck(handler, event, options));
  queue = result.catch(() => {});
  return result;
}

/** What every scenario of one check shares. */
interface CheckRun {
  server: string;
  schema: string;
  queries: Queries;
  registry: HandlerRegistry;
  log: Logger;
  verified: VerifiedEvent;
  /** Every request of the check, in order (captureRequests). */
  requests: Request[];
  scratch: ScratchDatabases;
  /** The database every scenario is cloned from: Oncehook's schema plus the handler's setup. */
  template: string;
  options: CheckOptions;
  scenarios: number;
}

interface ScenarioResult {
  report: ScenarioReport;
  state: unknown;
  /** The keys each external step was given. */
  keys: Map<string, Set<string>>;
}

/** The event as the claim would store it: the same id in every scenario, as redeliveries are. */
function verifiedEventOf(handler: Handler, event: CheckEvent): VerifiedEvent {
  const source = event.source ?? handler.source;
  return {
    source: source,
    kind: event.kind ?? handler.kind ?? source,
    eventId: event.eventId ?? `evt_check_${handler.name.replace(/[^A-Za-z0-9._-]/g, '_')}`,
    type: event.type,
    signedAt: event.signedAt ?? new Date(),
    rawBody: JSON.stringify(event.payload),
    payload: event.payload,
    meta: event.meta ?? {},
  };
}

async function runCheck(handler: Handler, event: CheckEvent, options: CheckOptions): Promise<CheckReport> {
  const server = serverUrl(options.databaseUrl);
  const schema = options.schema ?? DEFAULT_SCHEMA;
  const requests: Request[] = [];
  const { scratch, removedLeftovers } = await openScratchDatabases(server, databasePrefix(options.databasePrefix), randomBytes(4).toString('hex'));
  // Each request is attributed to the step it runs in (currentStep), which the engine tracks
  // only when asked: the check's process pays an async hook per promise for it, a worker never.
  // mutant: testkit-steps-untracked
  trackCurrentStep();
  const uninstall = captureRequests(requests);
  try {
    const template = await scratch.create('tpl');
    const templatePool = createPool(`${server}/${template}`, { max: 1 });
    try {
      await migrate(templatePool, { schema });
      await options.setup?.(templatePool);
    } finally {
      await templatePool.end();
    }
    const check: CheckRun = {
      server,
      schema,
      queries: createQueries(schema),
      registry: new HandlerRegistry([handler]),
      log: createLogger('checkHandler', process.env.ONCEHOOK_CHECK_LOG ?? 'silent'),
      verified: verifiedEventOf(handler, event),
      requests,
      scratch,
      template,
      options,
      scenarios: 0,
    };
    const { scenarios, boundaries } = await runScenarios(check);
    const problems = scenarios.flatMap((s) => [...new Set(s.problems)].map((p) => `${s.name}: ${p}`));
    return { ok: problems.length === 0, problems, boundaries: boundaries.map((b) => b.label), scenarios, databases: [...scratch.names], removedLeftovers };
  } finally {
    uninstall();
    await scratch.finish(options.keepDatabases === true);
  }
}

/**
 * The clean run, then a crash at each of its step boundaries, then concurrent duplicates,
 * each compared with the clean run (its keys, its steps, its final state).
 */
async function runScenarios(check: CheckRun): Promise<{ scenarios: ScenarioReport[]; boundaries: Boundary[] }> {
  const { options } = check;
  const keyless = new Set(options.keylessSteps ?? []);
  const reference = await runScenario(check, 'clean run', null);
  reference.report.problems.push(...keyProblems(reference.report, null, keyless));
  const scenarios = [reference.report];
  const boundaries: Boundary[] = [];
  if (reference.report.eventState !== 'done') return { scenarios, boundaries };
  /** Compared with the clean run: the same final state. */
  const compared = (run: ScenarioResult) => {
    if (options.state && JSON.stringify(run.state) !== JSON.stringify(reference.state)) {
      run.report.problems.push(`the state differs from the clean run's: ${JSON.stringify(run.state).slice(0, 300)} instead of ${JSON.stringify(reference.state).slice(0, 300)}`);
    }
    scenarios.push(run.report);
  };
  const externals = new Set(reference.keys.keys());
  for (const step of reference.report.committed) {
    boundaries.push(
      externals.has(step)
        ? { label: `after "${step}" returned, before its record`, point: 'worker.after-external-call', step }
        : { label: `before "${step}" commits`, point: 'worker.step-before-commit', step },
    );
  }
  for (const boundary of boundaries) {
    const run = await runScenario(check, `crash ${boundary.label}`, boundary);
    run.report.problems.push(...keyProblems(run.report, reference.report, keyless));
    for (const step of reference.report.committed) {
      if (!run.report.committed.includes(step))
        run.report.problems.push(`step "${step}" committed in the clean run but not after the crash: the resumed run took another path (decide with recorded step results)`);
    }
    compared(run);
  }
  const duplicates = options.duplicates ?? 5;
  if (duplicates > 0) {
    const run = await runScenario(check, `${duplicates} concurrent duplicate deliveries`, null, duplicates);
    run.report.problems.push(...keyProblems(run.report, reference.report, keyless));
    compared(run);
  }
  return { scenarios, boundaries };
}

/** What one scenario watches: the keys given, the commits, and a handler that swallows the crash. */
function watchScenario(crashAt: Boundary | null) {
  const watch = {
    problems: [] as string[],
    committed: [] as string[],
    commits: new Map<string, number>(),
    keysGiven: new Map<string, Set<string>>(),
    crashed: false,
    /** Between the simulated crash and the end of its attempt: no step may run or commit then. */
    crashedAttemptStillRunning: false,
  };
  const hooks: EngineHooks = {
    externalCall(info) {
      if (watch.crashedAttemptStillRunning)
        watch.problems.push(`the handler caught the simulated crash and went on: step "${info.step}" ran after it in the same attempt; let step errors propagate`);
      const set = watch.keysGiven.get(info.step) ?? new Set<string>();
      if (info.idempotencyKey) set.add(info.idempotencyKey);
      watch.keysGiven.set(info.step, set);
    },
    stepCommitted(info) {
      if (watch.crashedAttemptStillRunning)
        watch.problems.push(`the handler caught the simulated crash and went on: step "${info.step}" committed after it in the same attempt; let step errors propagate`);
      watch.commits.set(info.step, (watch.commits.get(info.step) ?? 0) + 1);
      watch.committed.push(info.step);
    },
  };
  const faults: Faults = {
    async hit(point, detail) {
      if (crashAt && !watch.crashed && point === crashAt.point && detail?.step === crashAt.step) {
        watch.crashed = true;
        watch.crashedAttemptStillRunning = true;
        throw new SimulatedCrash(`simulated crash ${crashAt.label}`);
      }
    },
  };
  return { watch, hooks, faults };
}

/** One scenario on a fresh clone of the template: claim, run, resume until settled, judge. */
async function runScenario(check: CheckRun, name: string, crashAt: Boundary | null, duplicates = 1): Promise<ScenarioResult> {
  const { queries, schema, verified, options } = check;
  check.scenarios += 1;
  const database = await check.scratch.create(String(check.scenarios), check.template);
  const pool = createPool(`${check.server}/${database}`, { max: duplicates + 4 });
  const { watch, hooks, faults } = watchScenario(crashAt);
  const { problems } = watch;
  const first = check.requests.length;
  // The engine as a worker runs it (createEngine), an event without a handler a failure.
  const deps = createEngine({ pool, schema, handlers: check.registry, log: check.log, faults, settings: { unhandled: 'fail' } });
  subscribeHooks(deps.events, hooks);
  try {
    const claims = await Promise.all(Array.from({ length: duplicates }, () => queries.claimEvent(pool, verified)));
    const rowId = claims.find((c) => c.outcome === 'new')?.rowId;
    if (rowId === undefined) throw new Error('no claim created the event');
    const job = { rowId, source: verified.source, eventId: verified.eventId, attempt: 0 };
    await Promise.all(Array.from({ length: duplicates }, () => processJob(deps, job)));
    watch.crashedAttemptStillRunning = false;
    // Resume as the next worker would: each unfinished run, attempt after attempt.
    for (let round = 0; round < 10; round += 1) {
      const runs = await queries.getRuns(pool, rowId);
      const pending = runs.filter((r) => r.state === 'received' || r.state === 'processing');
      if (pending.length === 0) break;
      // A crash leaves the lease to expire; the check expires it at once instead of waiting.
      await pool.query(`UPDATE ${schema}.handler_runs SET lease_until = now() - interval '1 second' WHERE event_row_id = $1 AND state = 'processing'`, [rowId]);
      for (const run of pending) await processJob(deps, { ...job, handler: run.handler, attempt: run.attempts });
      watch.crashedAttemptStillRunning = false;
    }
    const eventRow = await queries.getEvent(pool, rowId);
    const runs = await queries.getRuns(pool, rowId);
    const count = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.events`);
    if (count.rows[0]?.n !== 1) problems.push(`${count.rows[0]?.n} event rows for one event key`);
    if (eventRow?.state !== 'done') {
      const why = runs.map((r) => `${r.handler}: ${r.state}${r.lastError ? ` (${r.lastError})` : ''}`).join('; ');
      problems.push(`the event ended ${eventRow?.state ?? 'missing'}, not done: ${why || eventRow?.note || 'no run'}`);
    }
    for (const [step, n] of watch.commits) if (n > 1) problems.push(`step "${step}" committed ${n} times`);
    const state = options.state ? await options.state(pool) : undefined;
    // Scenarios run one after the other: this one's requests are the ones since it began.
    const mine = check.requests.slice(first);
    return {
      report: {
        name,
        database,
        attempts: Math.max(0, ...runs.map((r) => r.attempts)),
        eventState: eventRow?.state ?? 'missing',
        committed: watch.committed,
        requests: mine.map((r) => ({ step: r.step.step, attempt: r.step.attempt, method: r.method, url: r.url, given: r.step.idempotencyKey, sent: sentKey(r) })),
        problems,
      },
      state,
      keys: watch.keysGiven,
    };
  } finally {
    await pool.end();
  }
}

/** The key a request actually carried: its Idempotency-Key header, else the given key if the body holds it. */
function sentKey(request: Request): string | null {
  if (request.header) return request.header;
  return request.step.idempotencyKey && request.body.includes(request.step.idempotencyKey) ? request.step.idempotencyKey : null;
}

/** Key problems of one scenario's requests, compared with the clean run's. */
function keyProblems(report: ScenarioReport, reference: ScenarioReport | null, keyless: ReadonlySet<string>): string[] {
  const out: string[] = [];
  const byStep = new Map<string, ScenarioReport['requests']>();
  for (const r of report.requests) byStep.set(r.step, [...(byStep.get(r.step) ?? []), r]);
  for (const [step, list] of byStep) {
    if (keyless.has(step)) continue;
    const missing = list.find((r) => r.sent === null);
    if (missing) {
      out.push(
        `external step "${step}" sent ${missing.method} ${missing.url} without an idempotency key (neither the Idempotency-Key header nor the key it was given in the body): the API cannot deduplicate a retry`,
      );
      continue;
    }
    const wrong = list.find((r) => r.given !== null && r.sent !== r.given && !reference);
    if (wrong) out.push(`external step "${step}" sent Idempotency-Key "${wrong.sent}", not the key it was given ("${wrong.given}"); pass ctx's key to the API unchanged`);
    const sent = [...new Set([...(reference?.requests.filter((r) => r.step === step).map((r) => r.sent) ?? []), ...list.map((r) => r.sent)])];
    if (sent.length > 1) out.push(`external step "${step}" was called again with a DIFFERENT key: ${sent.map((k) => `"${k}"`).join(' then ')}; the API will apply it again`);
  }
  return out;
}
