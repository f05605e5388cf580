/**
 * Two handlers on one event type, for `npm run chaos` only (never deployed): every GitHub
 * `issues.opened` the chaos run sends fans out to both. Each records one row per event in
 * `chaos_fanout` (created by the chaos run), and the run checks that every done event has
 * exactly one row per handler. `chaos.issue-notify` also fails the first attempt of a third of
 * the events (a transient error), so the two handlers' runs retry independently while workers
 * are killed and Redis and Postgres restart around them: one handler's retries must never
 * re-run the other's step. It ends with a `final` external step (`ping`, the sandbox's work
 * API, task `chaos-ping`): the run checks each done event's call was applied once, under the
 * key its step recorded.
 *
 * Two more, for flow control (docs/flow-control.md): `chaos.issue-limited` has `concurrency: 2` (CHAOS_LIMITED_SLOTS)
 * and calls the sandbox's work API (CHAOS_WORK_URL), which measures in flight itself (the run
 * checks it never saw more than 2); `chaos.issue-paused` is paused before the first delivery
 * and resumed by the chaos run mid-way (`oncehook pause` / `resume`): its runs wait, then drain,
 * each once.
 */
import { createHash } from 'node:crypto';
import { callWork } from '@oncehook/sandbox/work-client';
import { defineHandler } from '@oncehook/sdk';

const index = defineHandler({ name: 'chaos.issue-index', source: 'github', type: 'issues.opened', description: 'chaos: fan-out, first handler' }, async (event, ctx) => {
  await ctx.transaction(
    'index',
    async (tx) => {
      await tx.query(`INSERT INTO chaos_fanout (handler, event_id) VALUES ('index', $1::text)`, [event.eventId]);
      return { indexed: event.eventId };
    },
    { final: true },
  );
});

const workUrl = process.env.CHAOS_WORK_URL ?? 'http://127.0.0.1:9';

/** One call to the sandbox's work API (CHAOS_WORK_URL), keyed: it applies each key once and counts. */
const work = (task: string, key: string, ms: number, idempotencyKey: string, signal: AbortSignal) => callWork(workUrl, { task, key, ms, idempotencyKey, signal });

const notify = defineHandler({ name: 'chaos.issue-notify', source: 'github', type: 'issues.opened', description: 'chaos: fan-out, second handler (flaky)' }, async (event, ctx) => {
  const flaky = createHash('sha256').update(event.eventId).digest()[0]! % 3 === 0;
  if (flaky && event.attempt === 1) throw new Error('notification service unavailable (chaos: first attempt of a third of the events)');
  await ctx.transaction('notify', async (tx) => {
    await tx.query(`INSERT INTO chaos_fanout (handler, event_id) VALUES ('notify', $1::text)`, [event.eventId]);
    return { notified: event.eventId };
  });
  // A final external step: its record, the run's done and the event's in one statement, shared
  // with the records of other runs that return together (group commit).
  await ctx.step('ping', ({ idempotencyKey, signal }) => work('chaos-ping', event.eventId, 0, idempotencyKey, signal).then(() => ({ pinged: true })), { final: true });
});

/** Its limit: 2 unless the chaos run asks for more (`--limited-slots`, for a run 2 slots cannot keep up with). */
const limitedSlots = Number(process.env.CHAOS_LIMITED_SLOTS ?? '2');

const limited = defineHandler(
  { name: 'chaos.issue-limited', source: 'github', type: 'issues.opened', concurrency: limitedSlots, description: `chaos: at most ${limitedSlots} in flight` },
  async (event, ctx) => {
    await ctx.step('work', ({ idempotencyKey, signal }) => work('chaos-limited', event.eventId, 30, idempotencyKey, signal).then(() => ({ worked: true })));
    await ctx.transaction(
      'record',
      async (tx) => {
        await tx.query(`INSERT INTO chaos_fanout (handler, event_id) VALUES ('limited', $1::text)`, [event.eventId]);
        return null;
      },
      { final: true },
    );
  },
);

const paused = defineHandler({ name: 'chaos.issue-paused', source: 'github', type: 'issues.opened', description: 'chaos: paused, then resumed' }, async (event, ctx) => {
  await ctx.transaction(
    'record',
    async (tx) => {
      await tx.query(`INSERT INTO chaos_fanout (handler, event_id) VALUES ('paused', $1::text)`, [event.eventId]);
      return null;
    },
    { final: true },
  );
});

export default [index, notify, limited, paused];
