/**
 * Outbound idempotency keys: the same on every attempt of a step, different for every step,
 * handler, event and replay generation; runs carried over from before handler names keep the
 * old derivation. Mutants killed: key-ignores-handler, key-ignores-generation, legacy-key-scheme.
 */
import { createHash } from 'node:crypto';
import { idempotencyKeyFor, jobIdFor } from '@oncehook/core';
import { expect, it } from 'vitest';

const base = { source: 'stripe', eventId: 'evt_1', handler: 'refunds', step: 'email', generation: 0, keyScheme: 2 as const };

it('is deterministic, and differs by source, event, handler, step and generation', () => {
  const key = idempotencyKeyFor(base);
  expect(key).toMatch(/^oncehook-[0-9a-f]{48}$/);
  expect(idempotencyKeyFor({ ...base })).toBe(key);
  const variants = [{ source: 'stripe-eu' }, { eventId: 'evt_2' }, { handler: 'ledger' }, { step: 'email:2' }, { generation: 1 }].map((change) =>
    idempotencyKeyFor({ ...base, ...change }),
  );
  expect(new Set([key, ...variants]).size).toBe(6);
});

it('scheme 1 (runs from before handler names) is the previous derivation: no handler in it', () => {
  const legacy = `oncehook-${createHash('sha256').update('stripe\0evt_1\0email\x000').digest('hex').slice(0, 48)}`;
  expect(idempotencyKeyFor({ ...base, keyScheme: 1 })).toBe(legacy);
  expect(idempotencyKeyFor({ ...base, handler: 'another', keyScheme: 1 })).toBe(legacy);
  expect(idempotencyKeyFor({ ...base, keyScheme: 1 })).not.toBe(idempotencyKeyFor(base));
});

it('job ids: one per dispatch, one per (run, attempt); never integer-like or with ":"', () => {
  const dispatch = jobIdFor({ source: 'stripe', eventId: 'evt:1', attempt: 0 });
  const run = jobIdFor({ source: 'stripe', eventId: 'evt:1', handler: 'refunds', attempt: 2 });
  expect(dispatch).toMatch(/^evt-[0-9a-f]{32}-d$/);
  expect(run).toMatch(/^run-[0-9a-f]{32}-2$/);
  expect(jobIdFor({ source: 'stripe', eventId: 'evt:1', handler: 'ledger', attempt: 2 })).not.toBe(run);
});
