/**
 * The engine's one observation surface (core/src/engine-events.ts), against the real
 * database: every run, step, unhandled event, dispatch batch and batch of runs' statements is reported on
 * `engine.events`; a listener that throws or rejects never changes a run, its error is logged
 * (a bounded number of lines), and the other listeners still hear the event.
 */
import { createEngineEvents, enqueueEvent, jobIdFor, subscribeHooks, type EngineEventMap, type EngineEventName, type EventJobData } from '@oncehook/core';
import { waitFor } from '@oncehook/harness';
import { defineHandler, PermanentError } from '@oncehook/sdk';
import { createWorkerMetrics, noFaults } from '@oncehook/shared';
import { buildWorker, loadWorkerConfig } from 'oncehook';
import pino from 'pino';
import { expect, it } from 'vitest';
import { useTestDatabase } from './helpers/db.js';
import { claimStripe, dispatchJob, engine, q, T, testEnv, testLog, testPrefix } from './helpers/stack.js';

const scope = useTestDatabase({ beforeEach: (db) => db.pool.query(`TRUNCATE ${T.events} CASCADE`) });

/** A logger whose lines are kept, to read what a failed listener left. */
function memoryLog() {
  const lines: { msg: string; event?: string; suppressed?: number }[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { log, lines };
}

const pays = defineHandler({ name: 'pays', source: 'stripe', type: 'invoice.paid' }, async (_event, ctx) => {
  await ctx.transaction('record', async () => ({ ok: true }));
  await ctx.step('charge', async ({ idempotencyKey }) => ({ charged: idempotencyKey.length > 0 }));
});
const refuses = defineHandler({ name: 'refuses', source: 'stripe', type: 'invoice.voided' }, async () => {
  throw new PermanentError('no ledger account');
});

it("reports each run, step, unhandled event, dispatch batch and batch of runs' statements, in the order they happen", async () => {
  const events = createEngineEvents(testLog);
  const heard: string[] = [];
  const names: EngineEventName[] = ['run:ended', 'run:waiting', 'event:unhandled', 'step:calling', 'step:committed', 'dispatch:batch', 'runs:batch'];
  for (const name of names) {
    events.on(name, (payload: EngineEventMap[typeof name]) => {
      if (name === 'run:ended') {
        const run = payload as EngineEventMap['run:ended'];
        expect(run.seconds).toBeGreaterThan(0);
        heard.push(`${name} ${run.handler} ${run.outcome} ${run.source} ${run.type}`);
      } else if ('step' in payload) heard.push(`${name} ${payload.step} ${payload.kind}${payload.idempotencyKey ? ' keyed' : ''}`);
      else heard.push(`${name} ${JSON.stringify(payload)}`);
    });
  }
  const e = engine(scope.db.pool, [pays, refuses], { retry: { maxAttempts: 1, backoffMs: 10 } }, { events });
  await e.processJob(dispatchJob(await claimStripe(scope.db.pool, 'evt_ev_paid', 'invoice.paid'), 'evt_ev_paid'));
  await e.processJob(dispatchJob(await claimStripe(scope.db.pool, 'evt_ev_void', 'invoice.voided'), 'evt_ev_void'));
  await e.processJob(dispatchJob(await claimStripe(scope.db.pool, 'evt_ev_none', 'customer.created'), 'evt_ev_none'));
  expect(heard).toEqual([
    'dispatch:batch {"events":1}',
    'step:committed record local',
    // The lease proof before the call, the call's record, the run's done: each a group commit of one.
    'runs:batch {"statement":"proof","runs":1}',
    'step:calling charge external keyed',
    'runs:batch {"statement":"record","runs":1}',
    'step:committed charge external keyed',
    'runs:batch {"statement":"done","runs":1}',
    'run:ended pays done stripe invoice.paid',
    'dispatch:batch {"events":1}',
    'run:ended refuses failed stripe invoice.voided',
    'event:unhandled {"source":"stripe","type":"customer.created"}',
  ]);
});

it('a listener that throws or rejects changes nothing: the run is done, the other listeners hear it, the error is logged at most 5 times a minute', async () => {
  const { log, lines } = memoryLog();
  const events = createEngineEvents(log);
  events.on('step:committed', () => {
    throw new Error('listener bug');
  });
  events.on('run:ended', async () => {
    throw new Error('async listener bug');
  });
  const ended: string[] = [];
  events.on('run:ended', (run) => void ended.push(run.outcome));
  const e = engine(scope.db.pool, [pays], {}, { events });
  for (let i = 0; i < 7; i += 1) {
    const rowId = await claimStripe(scope.db.pool, `evt_ev_bug_${i}`, 'invoice.paid');
    expect(await e.processJob(dispatchJob(rowId, `evt_ev_bug_${i}`))).toMatchObject({ kind: 'runs', runs: [{ kind: 'done' }] });
    expect((await q.getEvent(scope.db.pool, rowId))?.state).toBe('done');
  }
  await new Promise((resolve) => setImmediate(resolve));
  expect(ended).toEqual(Array(7).fill('done'));
  // 14 step commits threw and 7 run listeners rejected: 5 lines each, the rest suppressed.
  const byEvent = (name: string) => lines.filter((l) => l.event === name);
  expect(byEvent('step:committed').length).toBe(5);
  expect(byEvent('run:ended').length).toBe(5);
  expect(byEvent('step:committed')[0]!.msg).toBe('a listener of "step:committed" failed; the run is not affected');
});

it('unsubscribing stops a listener; the old hooks are listeners of the step events', async () => {
  const events = createEngineEvents(testLog);
  const calls: string[] = [];
  subscribeHooks(events, { externalCall: (info) => void calls.push(`call ${info.step}`), stepCommitted: (info) => void calls.push(`commit ${info.step}`) });
  const stop = events.on('run:ended', () => void calls.push('ended'));
  expect(events.has('run:ended')).toBe(true);
  stop();
  expect(events.has('run:ended')).toBe(false);
  const e = engine(scope.db.pool, [pays], {}, { events });
  await e.processJob(dispatchJob(await claimStripe(scope.db.pool, 'evt_ev_hooks', 'invoice.paid'), 'evt_ev_hooks'));
  expect(calls).toEqual(['commit record', 'call charge', 'commit charge']);
});

it("a worker reports on worker.events and counts from there (under `source` and the deprecated `provider` label); buildWorker's deprecated hooks still hear the steps; a job of the release before (`provider`) is still read", async () => {
  const committed: string[] = [];
  const metrics = createWorkerMetrics({ defaultMetrics: false });
  const flaky = defineHandler({ name: 'flaky', source: 'stripe', type: 'invoice.created' }, async () => {
    throw new Error('not yet');
  });
  const env = testEnv({ databaseUrl: scope.db.url, prefix: testPrefix(), extra: { RETRY_BACKOFF_MS: '600000' } });
  const worker = buildWorker(loadWorkerConfig(env), [pays, flaky], {
    log: testLog,
    faults: noFaults,
    metrics,
    hooks: { stepCommitted: (info) => void committed.push(info.step) },
  });
  const ended: string[] = [];
  worker.events.on('run:ended', (run) => void ended.push(`${run.handler} ${run.outcome}`));
  try {
    await worker.start({ reconciler: false, metricsServer: false, backfill: false });
    const rowId = await claimStripe(scope.db.pool, 'evt_ev_worker', 'invoice.paid');
    await enqueueEvent(worker.queues, dispatchJob(rowId, 'evt_ev_worker'));
    await waitFor(async () => (await q.getEvent(scope.db.pool, rowId))?.state === 'done' || undefined, { what: 'the event done' });
    await waitFor(() => ended.length > 0 || undefined, { what: 'run:ended heard' });
    expect(ended).toEqual(['pays done']);
    expect(committed).toEqual(['record', 'charge']);

    // A job added by the release before names its source `provider`: still read (readJobData),
    // so the retry it schedules has its source, and the job id of that source's event.
    const oldRowId = await claimStripe(scope.db.pool, 'evt_ev_old_job', 'invoice.created');
    const { source, ...oldShape } = { ...dispatchJob(oldRowId, 'evt_ev_old_job'), provider: 'stripe' };
    expect(source).toBe('stripe');
    await worker.queues.shards[0]!.add('event', oldShape as unknown as EventJobData, { jobId: 'old-shape' });
    const retry = await waitFor(async () => (await worker.queues.shards[0]!.getDelayed()).find((job) => job.data.handler === 'flaky'), { what: "the old-shape job's retry" });
    expect(retry.data).toMatchObject({ source: 'stripe', eventId: 'evt_ev_old_job', handler: 'flaky', attempt: 1 });
    expect(retry.id).toBe(jobIdFor(retry.data));
    await waitFor(() => ended.length > 1 || undefined, { what: 'run:ended heard twice' });
    expect(ended).toEqual(['pays done', 'flaky retry']);
    const processed = (await metrics.processedTotal.get()).values;
    expect(processed).toEqual([
      expect.objectContaining({ value: 1, labels: { source: 'stripe', provider: 'stripe', type: 'invoice.paid', handler: 'pays', outcome: 'done' } }),
      expect.objectContaining({ value: 1, labels: { source: 'stripe', provider: 'stripe', type: 'invoice.created', handler: 'flaky', outcome: 'retry' } }),
    ]);
    // The run's statements that went through group commit, by statement: `pays`'s proof before
    // its call, its record and its done, one run each (a retry's verdict is not batched).
    const batches = (await metrics.runBatchSize.get()).values.filter((v) => v.metricName === 'oncehook_run_batch_size_count');
    expect(batches.map((v) => `${v.labels.statement} ${v.value}`).sort()).toEqual(['done 1', 'proof 1', 'record 1']);
  } finally {
    await worker.close();
  }
});
