/**
 * The enqueue relay (packages/core/src/enqueue-relay.ts): Redis off the answer's path. Jobs
 * pushed while an add is in flight go out together; a Redis that is down costs the caller
 * nothing and the backlog stays bounded (the reconciler enqueues what the relay drops: see
 * crash-recovery's "killed after the answer, before the enqueue").
 */
import { createEventQueue, createRedis, jobIdFor, createEnqueueRelay } from '@oncehook/core';
import { noFaults } from '@oncehook/shared';
import type { EventJobData } from '@oncehook/core';
import { REDIS_URL } from '@oncehook/harness';
import { afterAll, expect, it } from 'vitest';
import { testLog, testPrefix } from './helpers/stack.js';

const redis = createRedis(REDIS_URL, 'producer');
const queue = createEventQueue(redis, testPrefix());
afterAll(async () => {
  await queue.obliterate({ force: true });
  await queue.close();
  redis.disconnect();
});

const job = (n: number): EventJobData => ({ rowId: n, source: 'stripe', eventId: `evt_relay_${n}`, kind: 'stripe', type: 't', attempt: 0 });

it('jobs pushed while an add is in flight are added together, in bulk; push never waits', async () => {
  const adds: number[] = [];
  const relay = createEnqueueRelay({ queue, log: testLog, faults: noFaults, enqueueTimeoutMs: 2_000, maxBulk: 100, onAdd: (size) => adds.push(size) });
  // 300 pushes of one job each, in one tick: like 300 batches committing together.
  for (let n = 1; n <= 300; n += 1) relay.push([job(n)]);
  expect(relay.pending).toBe(300); // nothing was sent yet: push returned at once
  await relay.flush(5_000);
  expect(relay.pending).toBe(0);
  expect(adds).toEqual([100, 100, 100]);
  for (const n of [1, 150, 300]) expect(await queue.getJob(jobIdFor(job(n)))).toBeDefined();
});

it('Redis down: push still returns at once, the add fails (logged), and the backlog stays within maxPending', async () => {
  const dead = createRedis('redis://127.0.0.1:1', 'producer'); // nothing listens there
  const deadQueue = createEventQueue(dead, testPrefix());
  const outcomes: boolean[] = [];
  const relay = createEnqueueRelay({ queue: deadQueue, log: testLog, faults: noFaults, enqueueTimeoutMs: 200, maxBulk: 10, maxPending: 25, onAdd: (_, ok) => outcomes.push(ok) });
  try {
    for (let n = 1; n <= 100; n += 1) relay.push([job(1000 + n)]); // synchronous: nothing to await
    expect(relay.pending).toBe(25); // the other 75 are left to the reconciler
    await relay.flush(5_000);
    expect(relay.pending).toBe(0);
    expect(outcomes.length).toBeGreaterThan(0);
    expect(outcomes.every((ok) => !ok)).toBe(true);
  } finally {
    await deadQueue.close().catch(() => {});
    dead.disconnect();
  }
});
