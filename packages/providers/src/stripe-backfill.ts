/**
 * Stripe's backfill (backfill.ts): `GET /v1/events`, through Stripe's own client (`stripe`, an
 * optional peer dependency), with a restricted key that can read events.
 *
 * - The window is `created[gte]` / `created[lte]`; Stripe keeps 30 days of events.
 * - By default only `delivery_success=false`: events that are still pending or failed every
 *   delivery attempt to some endpoint of the account (Stripe's own words); `--all` lists every
 *   event of the window (each one already delivered is then a duplicate, nothing more).
 * - Pages of 100, newest first, `starting_after` the last id of the page, until `has_more` is
 *   false.
 * - API versions: an event read from /v1/events is rendered in the API version it was CREATED
 *   with (its `api_version` field), whatever version the client sends; an endpoint pinned to
 *   another version would have received another rendering of the same event. Handlers that read
 *   fields which differ between versions should look at `api_version` (docs/operating.md).
 * - Bounded (ListingBudget): every call through the outbound guard and to STRIPE_API_BASE's origin
 *   only, each answer and the listing's bytes capped, a page cursor seen twice stops it.
 * - 429: Stripe's client does not retry it (unless Stripe says `Stripe-Should-Retry`); the
 *   listing waits for its Retry-After and asks for the same page again, up to
 *   MAX_RATE_LIMITED_IN_A_ROW times in a row.
 */
import { ConfigError } from '@oncehook/sdk';
import { z } from 'zod';
import { VerificationError } from '@oncehook/shared';
import { BackfillApiError, keyRedacted, ListingBudget, MAX_RATE_LIMITED_IN_A_ROW, retryAfterMs, withRateLimits, type BackfillApi, type BackfillItem } from './backfill.js';
import { topLevelEvent, type TopLevelFields } from './types.js';

const KEY_PATTERN = /^(rk|sk)_(live|test)_[A-Za-z0-9]{8,}$/;
/** Why STRIPE_API_KEY is not a key that can read events, in the words that fit what it is. */
function stripeKeyProblem(key: string): string {
  const prefix = /^(rk|sk)_(live|test)_/.exec(key)?.[0];
  if (prefix)
    return `STRIPE_API_KEY starts like a Stripe key (${prefix}) but is too short or holds characters a key does not (${key.length} characters): copy the whole key from the Dashboard, Developers > API keys`;
  if (key.startsWith('pk_')) return 'STRIPE_API_KEY is a publishable key (pk_...), which cannot read events: use a restricted key (rk_...) with Events: Read';
  if (key.startsWith('whsec_'))
    return "STRIPE_API_KEY is a webhook signing secret (whsec_...): that is STRIPE_WEBHOOK_SECRET's; backfill needs a restricted key (rk_...) with Events: Read";
  return 'STRIPE_API_KEY is not a Stripe secret or restricted key (rk_live_..., rk_test_..., sk_...): create a restricted key with Events: Read in the Dashboard, Developers > API keys';
}

/** What Stripe's client throws, as far as a listing reads it. */
type StripeErrorShape = { statusCode?: number; message?: string; headers?: Record<string, string> };

/** Stripe's `types` filter takes at most 20. */
const MAX_TYPES = 20;

async function loadStripe(): Promise<typeof import('stripe').default> {
  try {
    return (await import('stripe')).default;
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND')
      throw new ConfigError("oncehook backfill stripe uses Stripe's own client: install it in your project (npm i stripe)");
    throw error;
  }
}

/** Stripe's backfill, reading each event's fields as stripe.ts reads a delivery's (`fields`). */
export const stripeBackfill = (fields: TopLevelFields): BackfillApi =>
  keyRedacted({
    env: [
      {
        name: 'STRIPE_API_KEY',
        schema: z.string().optional(),
        shown: 'unset',
        meaning: 'A Stripe key that can read events (a restricted key, `rk_live_...`, with Events: Read), for `oncehook backfill stripe`; nothing else uses it',
      },
      {
        name: 'STRIPE_API_BASE',
        schema: z.string().url().optional(),
        shown: 'https://api.stripe.com',
        meaning: "Where `oncehook backfill stripe` reaches Stripe's API (a proxy, or the sandbox's simulator in tests)",
      },
    ],
    history: { days: 30, what: 'Stripe lists the events of the last 30 days' },
    knowsUndelivered: true,

    async *list(context, query, hooks = {}) {
      const key = context.env.STRIPE_API_KEY;
      if (!key)
        throw new ConfigError(
          'STRIPE_API_KEY is not set: backfill reads events with a Stripe key that can (create a restricted key with Events: Read in the Dashboard, Developers > API keys)',
        );
      if (!KEY_PATTERN.test(key)) throw new ConfigError(stripeKeyProblem(key));
      let base: URL;
      try {
        base = new URL(context.env.STRIPE_API_BASE ?? 'https://api.stripe.com');
      } catch {
        throw new ConfigError(`STRIPE_API_BASE is not a URL (got "${context.env.STRIPE_API_BASE}")`);
      }
      if (base.protocol !== 'https:' && base.protocol !== 'http:') throw new ConfigError(`STRIPE_API_BASE must be an http(s) URL (got "${base.protocol}")`);
      if (context.cursor && !/^[\w-]{1,255}$/.test(context.cursor)) throw new ConfigError('the cursor to go on from is not a Stripe event id (evt_...): start the listing again');
      if (query.types && query.types.length > MAX_TYPES)
        throw new ConfigError(`Stripe filters events by at most ${MAX_TYPES} types at once (got ${query.types.length}): run backfill once per group of types`);
      const Stripe = await loadStripe();
      // Every call through the outbound guard, to this origin only, its answers bounded (ListingBudget).
      const budget = new ListingBudget("Stripe's API", base.origin, context.limits);
      const stripe = new Stripe(key, {
        host: base.hostname,
        port: base.port || (base.protocol === 'https:' ? 443 : 80),
        protocol: base.protocol === 'https:' ? 'https' : 'http',
        httpClient: Stripe.createFetchHttpClient(budget.fetch()),
        maxNetworkRetries: 2,
        timeout: 30_000,
        telemetry: false,
      });
      const seconds = (date: Date) => Math.floor(date.getTime() / 1000);
      let startingAfter = context.cursor ?? undefined;
      let calls = 0;
      for (;;) {
        if (context.maxCalls !== null && calls >= context.maxCalls) return;
        budget.page(startingAfter ?? null);
        let page: Awaited<ReturnType<typeof stripe.events.list>>;
        try {
          page = await withRateLimits(
            () =>
              stripe.events.list({
                created: { gte: seconds(query.since), lte: seconds(query.until) },
                limit: 100,
                ...(query.all ? {} : { delivery_success: false }),
                ...(query.types ? { types: [...query.types] } : {}),
                ...(startingAfter ? { starting_after: startingAfter } : {}),
              }),
            (error) => {
              const e = error as StripeErrorShape;
              return e.statusCode === 429 ? retryAfterMs(e.headers?.['retry-after'], context.maxRateLimitWaitMs) : null;
            },
            context,
            hooks,
          );
        } catch (error) {
          if (budget.stopped) throw budget.explain(error);
          const e = error as StripeErrorShape;
          throw new BackfillApiError(
            `Stripe's API ${e.statusCode ? `answered ${e.statusCode}` : 'could not be reached'}${e.statusCode === 429 ? ` ${MAX_RATE_LIMITED_IN_A_ROW + 1} times in a row` : ''}: ${e.message ?? String(error)}`,
            e.statusCode ?? null,
          );
        }
        calls += 1;
        hooks.onPage?.(calls);
        for (const event of page.data) yield toItem(event, context.source, fields);
        const last = page.data.at(-1);
        const more = page.has_more && last !== undefined;
        hooks.onCursor?.(more ? last.id : null);
        if (!more) return;
        startingAfter = last.id;
      }
    },
  });

/** A listed event as a delivery of it would be verified (the same fields, the same limits). */
function toItem(event: { id: string }, source: { name: string; kind: string }, fields: TopLevelFields): BackfillItem {
  try {
    return { event: topLevelEvent(Buffer.from(JSON.stringify(event)), source, fields) };
  } catch (error) {
    if (error instanceof VerificationError) return { refused: { id: String(event.id).slice(0, 255), reason: error.message } };
    throw error;
  }
}
