/**
 * What an operator can do to events: list, show, re-drive, replay, bulk re-drive with a dry
 * run. Shared by the CLI (`npm run oncehook`) and the admin HTTP API in ingest.
 *
 * - re-drive: finish what was started. Same generation, so the same outbound idempotency keys
 *   and committed steps skipped: no second external effect.
 * - replay: do it again on purpose. New generation, new keys: exactly one new effect per
 *   step. Who and why are recorded.
 * Neither ever takes an event from a worker holding a live lease (guarded UPDATEs).
 */
import type { Queue } from 'bullmq';
import type { Pool } from './db/pool';
import * as queries from './db/queries';
import type { EventFilter } from './db/queries';
import type { EventJobData } from './interfaces';
import { enqueueEvent } from './queue';

export type ActionResult =
  | { ok: true; rowId: number; fromState: string; generation?: number }
  | { ok: false; rowId: number; reason: string };

export interface Operations {
  list(filter: EventFilter): Promise<queries.EventSummary[]>;
  show(ref: string | number): Promise<queries.EventDetail | null>;
  redrive(rowId: number, actor: string, reason: string): Promise<ActionResult>;
  replay(rowId: number, actor: string, reason: string): Promise<ActionResult>;
  /** Re-drives every event matching the filter (default: failed); with dryRun, changes nothing. */
  bulkRedrive(filter: EventFilter, options: { dryRun: boolean; actor: string; reason: string }): Promise<{ dryRun: boolean; matched: number; results: ActionResult[] }>;
}

/** A row id, or `provider/event_id`. */
export async function resolveEventRef(pool: Pool, ref: string | number): Promise<number | null> {
  if (typeof ref === 'number' || /^\d+$/.test(ref)) return Number(ref);
  const slash = ref.indexOf('/');
  if (slash <= 0) return null;
  const row = await queries.getEventByKey(pool, ref.slice(0, slash), ref.slice(slash + 1));
  return row?.id ?? null;
}

async function explainRefusal(pool: Pool, rowId: number, action: string): Promise<string> {
  const row = await queries.getEvent(pool, rowId);
  if (!row) return `no event with row id ${rowId}`;
  if (row.state === 'processing') return `event ${rowId} is being processed by a worker (lease until ${row.leaseUntil?.toISOString()}); ${action} refused`;
  return `event ${rowId} is ${row.state}; ${action} applies to ${action === 'replay' ? 'done or failed' : 'failed, received or stuck processing'} events`;
}

export function createOperations(deps: { pool: Pool; queue: Queue<EventJobData> }): Operations {
  const { pool, queue } = deps;
  const operations: Operations = {
    list: (filter) => queries.listEvents(pool, filter),
    async show(ref) {
      const rowId = await resolveEventRef(pool, ref);
      return rowId === null ? null : queries.showEvent(pool, rowId);
    },
    async redrive(rowId, actor, reason) {
      const moved = await queries.redriveEvent(pool, rowId, actor, reason);
      if (!moved) return { ok: false, rowId, reason: await explainRefusal(pool, rowId, 'redrive') };
      await enqueueEvent(queue, moved.ref, { replaceFinished: true });
      return { ok: true, rowId, fromState: moved.fromState };
    },
    async replay(rowId, actor, reason) {
      const moved = await queries.replayEvent(pool, rowId, actor, reason);
      if (!moved) return { ok: false, rowId, reason: await explainRefusal(pool, rowId, 'replay') };
      await enqueueEvent(queue, moved.ref, { replaceFinished: true });
      return { ok: true, rowId, fromState: moved.fromState, generation: moved.generation };
    },
    async bulkRedrive(filter, options) {
      const matching = await queries.listEvents(pool, { ...filter, state: filter.state ?? 'failed', limit: filter.limit ?? 1000 });
      if (options.dryRun) return { dryRun: true, matched: matching.length, results: matching.map((e) => ({ ok: true, rowId: e.id, fromState: e.state })) };
      const results: ActionResult[] = [];
      for (const event of matching) results.push(await operations.redrive(event.id, options.actor, options.reason));
      return { dryRun: false, matched: matching.length, results };
    },
  };
  return operations;
}
