/**
 * Advisory lock keys, from one helper: a 64-bit key hashed from the framework's schema and a
 * purpose, never a magic number in some file. Two Oncehook installations in different schemas
 * of one database never share a lock; an application's own advisory locks are very unlikely to
 * collide with a hash (pg-boss derives its keys the same way).
 *
 *   migrate     serialises `npm run migrate` runs (transaction-scoped)
 *   reconciler  one reconciler (and retention) pass at a time across all workers (transaction-scoped)
 *   object      a handler's ctx.lock(objectKey): local steps about one domain object, one at a
 *               time (transaction-scoped; the object key is part of the hash)
 *   flow        a handler's concurrency slots (of one key): the count of its runs in progress and
 *               the lease that takes a slot, one worker at a time (transaction-scoped; flow-control.ts)
 *   claim-body  one of CLAIM_BODY_STRIPES stripes of a source's body hashes, taken in key order by
 *               a batched claim before it inserts (transaction-scoped; queries.claimEvents)
 */
import { createHash } from 'node:crypto';

export type LockPurpose = 'migrate' | 'reconciler' | 'object' | 'claim-body' | 'flow';

/** The key as a decimal string, to pass as `$1::bigint`. `subject`: what is locked (the object key). */
export function advisoryLockKey(schema: string, purpose: LockPurpose, subject?: string): string {
  const parts = subject === undefined ? ['oncehook-lock', schema, purpose] : ['oncehook-lock', schema, purpose, subject];
  return createHash('sha256').update(parts.join('\0')).digest().readBigInt64BE(0).toString();
}

/** The advisory lock of a handler's concurrency slots of one key (null: the handler's one group). */
export function flowLockKey(schema: string, handler: string, flowKey: string | null): string {
  return advisoryLockKey(schema, 'flow', `${handler}\0${flowKey ?? ''}`);
}
