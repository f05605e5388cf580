/**
 * The admin's budget (docs/security.md, "The admin's budget"): what one operator, or anyone
 * holding read-only credentials, can take from the process that accepts deliveries.
 *
 * - Connections: the admin has a pool of its own (build-ingest.ts: ADMIN_POOL_SIZE, with
 *   statement, lock and idle-in-transaction timeouts set on every connection); a request that
 *   cannot get one within ADMIN_POOL_WAIT_MS is answered 503 `admin_busy`. Deliveries use
 *   ingest's pool and never wait for the admin's.
 * - Searches: at most ADMIN_SEARCHES_PER_USER running per user (429 `too_many_searches`); a
 *   search whose client goes away is cancelled in Postgres (operations.ts).
 * - Failures: whatever the database says (busy, slow, down) is a clear 4xx/503 naming why and
 *   what to do, never a 500.
 */
import { isDatabaseUnavailableError, PG_LOCK_NOT_AVAILABLE, PG_QUERY_CANCELED } from '@oncehook/shared';
import { SearchAbandonedError, SearchTooSlowError } from '@oncehook/core';
import type { Context, MiddlewareHandler } from 'hono';

export interface AdminBudget {
  poolSize: number;
  poolWaitMs: number;
  statementTimeoutMs: number;
  searchesPerUser: number;
  loginFailuresPerMinute: number;
}

/** When none is configured (createApp without buildIngest): the defaults of config.ts. */
export const DEFAULT_ADMIN_BUDGET: AdminBudget = { poolSize: 2, poolWaitMs: 1_000, statementTimeoutMs: 10_000, searchesPerUser: 2, loginFailuresPerMinute: 10 };

/** Each user's running searches. */
export function createSearchSlots(perUser: number) {
  const running = new Map<string, number>();
  return {
    /** Takes a slot for `actor`; the function returned gives it back. Null when the user has none left. */
    take(actor: string): (() => void) | null {
      const now = running.get(actor) ?? 0;
      // mutant: admin-searches-uncapped
      if (now >= perUser) return null;
      running.set(actor, now + 1);
      let given = false;
      return () => {
        if (given) return;
        given = true;
        const left = (running.get(actor) ?? 1) - 1;
        if (left <= 0) running.delete(actor);
        else running.set(actor, left);
      };
    },
  };
}

export type SearchSlots = ReturnType<typeof createSearchSlots>;

/** Runs a search in one of the user's (`actor`'s) slots, or answers 429. */
export async function inSearchSlot(c: Context, actor: string, slots: SearchSlots, budget: AdminBudget, search: () => Promise<Response>): Promise<Response> {
  const give = slots.take(actor);
  if (!give) {
    c.header('Retry-After', '2');
    return c.json(
      {
        error: 'too_many_searches',
        message: `you have ${budget.searchesPerUser} searches running (ADMIN_SEARCHES_PER_USER); wait for them to finish, or narrow them (a time range, a source, a type)`,
      },
      429,
    );
  }
  try {
    return await search();
  } finally {
    give();
  }
}

/** pg-pool's error when no connection came within its connectionTimeoutMillis. */
const isPoolWait = (error: unknown) => error instanceof Error && /timeout exceeded when trying to connect/i.test(error.message);

/** What the admin answers for a failure of the database or of its budget; null for anything else (a bug: 500). */
export function adminFailure(error: unknown, budget: AdminBudget): { status: 422 | 503; error: string; message: string } | null {
  if (error instanceof SearchTooSlowError) return { status: 422, error: 'search_too_slow', message: error.message };
  if (error instanceof SearchAbandonedError) return { status: 503, error: 'search_abandoned', message: error.message };
  // mutant: admin-busy-is-500
  if (isPoolWait(error))
    return {
      status: 503,
      error: 'admin_busy',
      message: `the admin's ${budget.poolSize} database connection(s) (ADMIN_POOL_SIZE) stayed busy with other admin requests for ${budget.poolWaitMs} ms; retry in a few seconds (deliveries are not affected: they have connections of their own)`,
    };
  const code = (error as { code?: string } | null)?.code;
  if (code === PG_QUERY_CANCELED)
    return {
      status: 503,
      error: 'admin_query_too_slow',
      message: `the database took longer than ${budget.statementTimeoutMs} ms (ADMIN_STATEMENT_TIMEOUT_MS) and the statement was stopped; retry later, or narrow what you asked for`,
    };
  if (code === PG_LOCK_NOT_AVAILABLE) return { status: 503, error: 'admin_busy', message: 'a row this needs is locked by a worker right now; retry in a few seconds' };
  if (isDatabaseUnavailableError(error)) return { status: 503, error: 'database_unavailable', message: 'the database is unavailable; retry later' };
  return null;
}

/** Answers the failures adminFailure knows with their status, after any admin route threw. */
export function answerAdminFailures(budget: AdminBudget): MiddlewareHandler {
  return async (c, next) => {
    await next();
    const failure = c.error ? adminFailure(c.error, budget) : null;
    if (!failure) return;
    const headers = failure.status === 503 ? { 'Retry-After': '5' } : undefined;
    c.res = c.json({ error: failure.error, message: failure.message }, failure.status, headers);
  };
}
