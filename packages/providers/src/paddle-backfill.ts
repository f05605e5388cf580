/**
 * Paddle Billing's backfill (backfill.ts): `GET /notifications`, the notifications of the
 * account's notification settings (webhook destinations), with an API key that can read them
 * (`notification.read`).
 *
 * - Not delivered: `status=failed,needs_retry,not_attempted` (Paddle gave up, is still retrying,
 *   or never tried); `--all` lists every status. The window is `from`/`to` on when the event
 *   occurred; Paddle keeps 90 days of notifications.
 * - Each notification's `payload` is the body Paddle delivers (`event_id`, `event_type`,
 *   `occurred_at`, `notification_id`, `data`): read as paddle.ts reads a delivery, so the id is
 *   the same `event_id`. Two notifications of one event (two destinations) are one event.
 * - Pages of up to 200, `after` from `meta.pagination.next`, until `has_more` is false. The
 *   next link is followed only on PADDLE_API_BASE's own origin (it carries the key): anything
 *   else stops the listing. Bounded like every listing (ListingBudget).
 * - Plain `fetch`, not Paddle's Node SDK: the SDK's client only knows Paddle's production and
 *   sandbox hosts (no base URL), so it could not be pointed at a proxy or at a simulator; the
 *   REST call is one GET with a Bearer key. 429: its Retry-After is waited out.
 */
import { ConfigError } from '@oncehook/sdk';
import { z } from 'zod';
import { VerificationError } from '@oncehook/shared';
import { BackfillApiError, keyRedacted, ListingBudget, MAX_RATE_LIMITED_IN_A_ROW, retryAfterMs, withRateLimits, type BackfillApi, type BackfillItem } from './backfill.js';
import { topLevelEvent, type TopLevelFields } from './types.js';

interface Notification {
  id: string;
  type: string;
  status: string;
  payload: Record<string, unknown> | null;
}

interface NotificationPage {
  data: Notification[];
  meta: { pagination: { next: string | null; has_more: boolean } };
}

/** Paddle Billing's backfill, reading each payload as paddle.ts reads a delivery (`fields`). */
export const paddleBackfill = (fields: TopLevelFields): BackfillApi =>
  keyRedacted({
    env: [
      {
        name: 'PADDLE_API_KEY',
        schema: z.string().optional(),
        shown: 'unset',
        meaning: 'A Paddle Billing API key with `notification.read`, for `oncehook backfill paddle`',
      },
      {
        name: 'PADDLE_API_BASE',
        schema: z.string().url().optional(),
        shown: 'https://api.paddle.com',
        meaning: "Where `oncehook backfill paddle` reaches Paddle's API (`https://sandbox-api.paddle.com` for a sandbox account)",
      },
    ],
    history: { days: 90, what: 'Paddle keeps notifications for 90 days' },
    knowsUndelivered: true,

    async *list(context, query, hooks = {}) {
      const key = context.env.PADDLE_API_KEY;
      if (!key) throw new ConfigError('PADDLE_API_KEY is not set: backfill reads notifications with a Paddle API key that can (permission notification.read)');
      if (key.length < 20 || /\s/.test(key)) throw new ConfigError('PADDLE_API_KEY does not look like a Paddle API key (pdl_live_apikey_... or pdl_sdbx_apikey_...)');
      const base = (context.env.PADDLE_API_BASE ?? 'https://api.paddle.com').replace(/\/+$/, '');
      if (!/^https?:\/\//.test(base)) throw new ConfigError(`PADDLE_API_BASE must be an http(s) URL (got "${base.slice(0, 60)}")`);
      const first = new URL(`${base}/notifications`);
      first.searchParams.set('per_page', '200');
      first.searchParams.set('order_by', 'id[DESC]');
      first.searchParams.set('from', query.since.toISOString());
      first.searchParams.set('to', query.until.toISOString());
      // mutant: paddle-backfill-lists-delivered
      if (!query.all) first.searchParams.set('status', 'failed,needs_retry,not_attempted');
      // Every call through the outbound guard, to PADDLE_API_BASE's origin only, its answers
      // bounded; a `next` link elsewhere (it would carry the key) stops the listing (ListingBudget).
      const budget = new ListingBudget("Paddle's API", first.origin, context.limits);
      const fetchPage = pageFetcher(budget.fetch(), key);
      let url: string | null = context.cursor ? budget.checkLink(context.cursor).toString() : first.toString();
      let calls = 0;
      const seen = new Set<string>();
      while (url !== null) {
        if (context.maxCalls !== null && calls >= context.maxCalls) return;
        budget.page(url === first.toString() ? null : url);
        const pageUrl: string = url;
        const page = await withRateLimits(
          () => fetchPage(pageUrl),
          (error) => (error instanceof RateLimited ? retryAfterMs(error.retryAfter, context.maxRateLimitWaitMs) : null),
          context,
          hooks,
        ).catch((error: unknown) => {
          if (budget.stopped) throw budget.explain(error);
          throw error instanceof RateLimited ? new BackfillApiError(`Paddle's API answered 429 ${MAX_RATE_LIMITED_IN_A_ROW + 1} times in a row`, 429) : error;
        });
        calls += 1;
        hooks.onPage?.(calls);
        for (const notification of page.data) {
          const item = toItem(notification, context.source, fields);
          // One event notified to several destinations: listed once.
          const id = 'event' in item ? item.event.eventId : item.refused.id;
          if (seen.has(id)) continue;
          seen.add(id);
          if (query.types && 'event' in item && !query.types.includes(item.event.type)) continue;
          yield item;
        }
        // Checked before it is reported (a scheduled pass stores it as its cursor) or followed.
        const next = page.meta?.pagination?.has_more && page.meta.pagination.next ? budget.checkLink(page.meta.pagination.next).toString() : null;
        hooks.onCursor?.(next);
        url = next;
      }
    },
  });

/** A 429 from Paddle, with its Retry-After. */
class RateLimited extends Error {
  constructor(readonly retryAfter: string | null) {
    super('rate limited');
  }
}

/** One page of notifications; throws RateLimited on a 429, BackfillApiError on any other failure. */
function pageFetcher(fetchFn: typeof globalThis.fetch, key: string): (url: string) => Promise<NotificationPage> {
  return async (url) => {
    let response: Response;
    try {
      response = await fetchFn(url, { headers: { authorization: `Bearer ${key}`, accept: 'application/json' }, signal: AbortSignal.timeout(30_000), redirect: 'manual' });
    } catch (error) {
      if (error instanceof BackfillApiError) throw error;
      const cause = (error as { cause?: { message?: string } }).cause;
      throw new BackfillApiError(`Paddle's API could not be reached: ${cause?.message ?? (error as Error).message}`, null);
    }
    if (response.status === 429) {
      await response.arrayBuffer().catch(() => undefined);
      throw new RateLimited(response.headers.get('retry-after'));
    }
    const body = (await response.json().catch(() => null)) as (NotificationPage & { error?: { detail?: string; code?: string } }) | null;
    if (!response.ok || !body || !Array.isArray(body.data)) {
      throw new BackfillApiError(`Paddle's API answered ${response.status}: ${body?.error?.detail ?? body?.error?.code ?? 'not a list of notifications'}`, response.status);
    }
    return body;
  };
}

function toItem(notification: Notification, source: { name: string; kind: string }, fields: TopLevelFields): BackfillItem {
  try {
    if (!notification.payload) throw new VerificationError(400, 'malformed_payload', 'the notification has no payload');
    return { event: topLevelEvent(Buffer.from(JSON.stringify(notification.payload)), source, fields) };
  } catch (error) {
    if (error instanceof VerificationError) return { refused: { id: String(notification.id).slice(0, 255), reason: error.message } };
    throw error;
  }
}
