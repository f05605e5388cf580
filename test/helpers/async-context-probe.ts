/**
 * Run as a process of its own (test/async-context.test.ts): counts AsyncLocalStorage `run()`
 * calls while the engine runs a handler with a local step (using ctx.lock) and an external step,
 * first as a worker runs it, then after `trackCurrentStep()`. Prints one JSON line.
 *
 *   node ... test/helpers/async-context-probe.ts <database url>
 */
import { AsyncLocalStorage } from 'node:async_hooks';

let runs = 0;
const original = AsyncLocalStorage.prototype.run;
AsyncLocalStorage.prototype.run = function counted(this: AsyncLocalStorage<unknown>, ...args: Parameters<typeof original>) {
  runs += 1;
  return original.apply(this, args);
} as typeof original;

const databaseUrl = process.argv[2];
if (!databaseUrl) throw new Error('usage: async-context-probe.ts <database url>');
const { createEngine, createQueries, currentStep, processJob, trackCurrentStep } = await import('@oncehook/core');
const { createLogger, createPool, DEFAULT_SCHEMA } = await import('@oncehook/shared');
const { defineHandler } = await import('@oncehook/sdk');

const pool = createPool(databaseUrl, { max: 2 });
const queries = createQueries(DEFAULT_SCHEMA);
const seen: (string | null)[] = [];
const handler = defineHandler({ name: 'probe.steps', source: 'stripe', type: 'price.created' }, async (_event, ctx) => {
  await ctx.transaction('apply', async (tx) => {
    await ctx.lock('probe:1');
    seen.push(currentStep()?.step ?? null);
    await tx.query('SELECT 1');
  });
  await ctx.step('notify', async () => {
    seen.push(currentStep()?.step ?? null);
    return { sent: true };
  });
});
const engine = createEngine({
  pool,
  schema: DEFAULT_SCHEMA,
  handlers: [handler],
  log: createLogger('probe', 'silent'),
  settings: { leaseMs: 60_000, retry: { maxAttempts: 1, backoffMs: 20 }, unhandled: 'done' },
});

async function runOnce(eventId: string): Promise<{ runs: number; outcome: string; seen: (string | null)[] }> {
  const body = { id: eventId, object: 'event', type: 'price.created', created: Math.floor(Date.now() / 1000), data: { object: {} } };
  const claimed = await queries.claimEvent(pool, {
    source: 'stripe',
    kind: 'stripe',
    eventId,
    type: 'price.created',
    signedAt: new Date(),
    rawBody: JSON.stringify(body),
    payload: body,
    meta: {},
  });
  if (claimed.outcome !== 'new') throw new Error(`expected a new claim of ${eventId}`);
  const before = runs;
  seen.length = 0;
  const outcome = await processJob(engine, { rowId: claimed.rowId, source: 'stripe', eventId, attempt: 0 });
  return { runs: runs - before, outcome: outcome.kind === 'runs' ? (outcome.runs[0]?.kind ?? 'none') : outcome.kind, seen: [...seen] };
}

const suffix = `${process.pid}_${Date.now()}`;
const asWorker = await runOnce(`evt_probe_worker_${suffix}`);
trackCurrentStep();
const tracked = await runOnce(`evt_probe_tracked_${suffix}`);
await pool.end();
process.stdout.write(`${JSON.stringify({ asWorker, tracked })}\n`);
