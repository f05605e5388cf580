/**
 * Readiness, one verdict for ingest's `/readyz` and a worker's `/readyz`: Postgres answers and
 * the queue's store can take a job on every shard (pingQueue), each within 2 s. Not ready
 * carries a `problem` line when Redis refused (readinessProblem: what to do, no addresses).
 */
import { withTimeout, type Pool } from '@oncehook/shared';
import { readinessProblem, type QueueBackend } from './queue.js';

export interface Readiness {
  ready: boolean;
  /** The JSON answer: `{ status, checks: { postgres, redis | queue }, problem? }`. */
  body: Record<string, unknown>;
}

export async function checkReadiness(pool: Pool, pingQueue: () => Promise<unknown>, backend: QueueBackend): Promise<Readiness> {
  const [postgres, queue] = await Promise.allSettled([withTimeout(pool.query('SELECT 1'), 2_000, 'postgres ping'), withTimeout(pingQueue(), 2_000, 'queue ping')]);
  // `redis` on the default backend; `queue` when the queue lives in Postgres (QUEUE_BACKEND).
  const queueCheck = backend === 'redis' ? 'redis' : 'queue';
  const checks = { postgres: postgres.status === 'fulfilled' ? 'ok' : 'unavailable', [queueCheck]: queue.status === 'fulfilled' ? 'ok' : 'unavailable' };
  const ready = postgres.status === 'fulfilled' && queue.status === 'fulfilled';
  const problem = queue.status === 'rejected' && backend === 'redis' ? { problem: readinessProblem(queue.reason) } : {};
  return { ready, body: { status: ready ? 'ready' : 'not_ready', checks, ...problem } };
}
