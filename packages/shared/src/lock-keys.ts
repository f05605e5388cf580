/**
 * Advisory lock keys, from one helper: a 64-bit key hashed from the framework's schema and a
 * purpose, never a magic number in some file. Two Oncehook installations in different schemas
 * of one database never share a lock; an application's own advisory locks are very unlikely to
 * collide with a hash (pg-boss derives its keys the same way).
 *
 *   migrate     serialises `npm run migrate` runs (transaction-scoped)
 *   reconciler  one reconciler (and retention) pass at a time across all workers (transaction-scoped)
 */
import { createHash } from 'node:crypto';

export type LockPurpose = 'migrate' | 'reconciler';

/** The key as a decimal string, to pass as `$1::bigint`. */
export function advisoryLockKey(schema: string, purpose: LockPurpose): string {
  return createHash('sha256').update(`oncehook-lock\0${schema}\0${purpose}`).digest().readBigInt64BE(0).toString();
}
