/**
 * Two handlers on one event type, for `npm run chaos` only (never deployed): every GitHub
 * `issues.opened` the chaos run sends fans out to both. Each records one row per event in
 * `chaos_fanout` (created by the chaos run), and the run checks that every done event has
 * exactly one row per handler. `chaos.issue-notify` also fails the first attempt of a third of
 * the events (a transient error), so the two handlers' runs retry independently while workers
 * are killed and Redis and Postgres restart around them: one handler's retries must never
 * re-run the other's step.
 */
import { createHash } from 'node:crypto';
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

const notify = defineHandler({ name: 'chaos.issue-notify', source: 'github', type: 'issues.opened', description: 'chaos: fan-out, second handler (flaky)' }, async (event, ctx) => {
  const flaky = createHash('sha256').update(event.eventId).digest()[0]! % 3 === 0;
  if (flaky && event.attempt === 1) throw new Error('notification service unavailable (chaos: first attempt of a third of the events)');
  await ctx.transaction(
    'notify',
    async (tx) => {
      await tx.query(`INSERT INTO chaos_fanout (handler, event_id) VALUES ('notify', $1::text)`, [event.eventId]);
      return { notified: event.eventId };
    },
    { final: true },
  );
});

export default [index, notify];
