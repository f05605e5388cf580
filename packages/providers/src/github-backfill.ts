/**
 * GitHub's backfill (backfill.ts): a webhook's deliveries, through GitHub's own client
 * (`@octokit/core`, an optional peer dependency), with a token that can read the hook.
 *
 * - The hook: GITHUB_BACKFILL_HOOK, `<owner>/<repo>/<hook id>` (a repository's hook) or
 *   `org/<org>/<hook id>` (an organization's). A GitHub App's own hook (`/app/hook/deliveries`)
 *   needs a JWT signed with the App's private key: not supported here (docs/operating.md).
 * - `GET .../hooks/{id}/deliveries`: pages of 100, newest first, `cursor` from the Link header.
 *   GitHub keeps 3 days of deliveries. There is no time filter: the listing stops at the first
 *   delivery older than the window.
 * - Not delivered: a delivery whose `status_code` is not 2xx, unless another delivery of the
 *   same GUID (a redelivery) succeeded. Each one's request (headers and payload) is fetched
 *   (`GET .../deliveries/{delivery_id}`, one more call) and claimed under the id a delivery of it
 *   has, `<hook id>:<X-GitHub-Delivery>`. Chosen over asking GitHub to redeliver it (`POST
 *   .../attempts`): it works while the endpoint is still unreachable from GitHub, it is done when
 *   the command ends, and it is counted. Its body is GitHub's JSON re-serialized, not the bytes
 *   GitHub signed: no body hash is stored for it (the id is the key; a later redelivery of the
 *   same GUID is a duplicate by id).
 * - Rate limits: a 429, or a 403 with `x-ratelimit-remaining: 0`, is waited out (Retry-After, or
 *   until `x-ratelimit-reset`, at most maxRateLimitWaitMs) and the call made again.
 */
import { ConfigError } from '@oncehook/sdk';
import { z } from 'zod';
import { VerificationError } from '@oncehook/shared';
import { BackfillApiError, keyRedacted, ListingBudget, MAX_RATE_LIMITED_IN_A_ROW, retryAfterMs, withRateLimits, type BackfillApi, type BackfillItem } from './backfill.js';
import type { VerifiedEvent } from '@oncehook/shared';

/** What @octokit/core throws, as far as a listing reads it. */
type OctokitErrorShape = { status?: number; message?: string; response?: { headers?: Record<string, string | undefined> } };

interface DeliverySummary {
  id: number;
  guid: string;
  delivered_at: string;
  status_code: number;
  event: string;
  action: string | null;
}

interface DeliveryDetail extends DeliverySummary {
  request: { headers: Record<string, string> | null; payload: Record<string, unknown> | null };
}

async function loadOctokit(): Promise<typeof import('@octokit/core').Octokit> {
  try {
    return (await import('@octokit/core')).Octokit;
  } catch (error) {
    if ((error as { code?: string }).code === 'ERR_MODULE_NOT_FOUND')
      throw new ConfigError("oncehook backfill github uses GitHub's own client: install it in your project (npm i @octokit/core)");
    throw error;
  }
}

/** `<owner>/<repo>/<hook id>` or `org/<org>/<hook id>`: the list route, the detail route and their parameters. */
function hookRoutes(value: string | undefined) {
  if (!value)
    throw new ConfigError(
      'GITHUB_BACKFILL_HOOK is not set: name the webhook whose deliveries to read, <owner>/<repo>/<hook id> or org/<org>/<hook id> (the hook id is in its settings URL)',
    );
  const org = /^org\/([A-Za-z0-9-]{1,39})\/(\d{1,20})$/.exec(value);
  if (org)
    return {
      list: 'GET /orgs/{org}/hooks/{hook_id}/deliveries',
      detail: 'GET /orgs/{org}/hooks/{hook_id}/deliveries/{delivery_id}',
      params: { org: org[1]!, hook_id: Number(org[2]) },
      hookId: org[2]!,
    };
  const repo = /^([A-Za-z0-9-]{1,39})\/([A-Za-z0-9._-]{1,100})\/(\d{1,20})$/.exec(value);
  if (repo)
    return {
      list: 'GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries',
      detail: 'GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries/{delivery_id}',
      params: { owner: repo[1]!, repo: repo[2]!, hook_id: Number(repo[3]) },
      hookId: repo[3]!,
    };
  throw new ConfigError(`GITHUB_BACKFILL_HOOK "${value.slice(0, 80)}" is neither <owner>/<repo>/<hook id> nor org/<org>/<hook id>`);
}

/** The URL of a Link header's rel="next", or null. */
export function nextLink(link: string | undefined): string | null {
  const next = link?.split(',').find((part) => /rel="next"/.test(part));
  return (next ? /<([^>]+)>/.exec(next)?.[1] : undefined) ?? null;
}

/** How github.ts reads a delivery's event (its `githubEvent`), passed in: no import cycle. */
type EventOf = (source: string, headers: { delivery: string; hookId: string; eventName: string; targetType: string | null }, json: Buffer, hash: Buffer | null) => VerifiedEvent;

/** GitHub's backfill, reading each delivery's event as github.ts reads a delivery (`eventOf`). */
export const githubBackfill = (eventOf: EventOf): BackfillApi =>
  keyRedacted({
    env: [
      {
        name: 'GITHUB_API_TOKEN',
        schema: z.string().optional(),
        shown: 'unset',
        meaning:
          "A GitHub token that can read the webhook's deliveries (fine-grained: the repository's Webhooks, read; an organization's hook: its Webhooks, read), for `oncehook backfill github`",
      },
      {
        name: 'GITHUB_BACKFILL_HOOK',
        schema: z.string().optional(),
        shown: 'unset',
        meaning: 'The webhook `oncehook backfill github` reads: `<owner>/<repo>/<hook id>` or `org/<org>/<hook id>`',
      },
      {
        name: 'GITHUB_API_BASE',
        schema: z.string().url().optional(),
        shown: 'https://api.github.com',
        meaning: "Where `oncehook backfill github` reaches GitHub's API (GitHub Enterprise Server: `https://<host>/api/v3`)",
      },
    ],
    history: { days: 3, what: "GitHub keeps a webhook's deliveries for 3 days" },
    knowsUndelivered: true,

    async *list(context, query, hooks = {}) {
      const token = context.env.GITHUB_API_TOKEN;
      if (!token) throw new ConfigError("GITHUB_API_TOKEN is not set: backfill reads the webhook's deliveries with a token that can (fine-grained: Webhooks, read)");
      const routes = hookRoutes(context.env.GITHUB_BACKFILL_HOOK);
      const baseUrl = (context.env.GITHUB_API_BASE ?? 'https://api.github.com').replace(/\/+$/, '');
      if (!/^https?:\/\//.test(baseUrl)) throw new ConfigError(`GITHUB_API_BASE must be an http(s) URL (got "${baseUrl.slice(0, 60)}")`);
      const Octokit = await loadOctokit();
      // Every call through the outbound guard, to GITHUB_API_BASE's origin only, its answers
      // bounded (ListingBudget); a Link to another origin stops the listing.
      const budget = new ListingBudget("GitHub's API", new URL(baseUrl).origin, context.limits);
      const octokit = new Octokit({ auth: token, baseUrl, request: { timeout: 30_000, fetch: budget.fetch() } });
      let calls = 0;

      /** One API call, a rate limit waited out (withRateLimits); any other failure a BackfillApiError. */
      async function call<T>(route: string, params: Record<string, unknown>): Promise<{ data: T; headers: Record<string, string | undefined> }> {
        try {
          const response = await withRateLimits(() => octokit.request(route, params), rateLimitWait, context, hooks);
          calls += 1;
          return { data: response.data as T, headers: response.headers as Record<string, string | undefined> };
        } catch (error) {
          if (budget.stopped) throw budget.explain(error);
          const e = error as OctokitErrorShape;
          throw new BackfillApiError(
            `GitHub's API ${e.status ? `answered ${e.status}` : 'could not be reached'}${rateLimitWait(error) !== null ? ` ${MAX_RATE_LIMITED_IN_A_ROW + 1} times in a row` : ''}: ${e.message ?? String(error)}`,
            e.status ?? null,
          );
        }
      }

      /** GitHub's rate limits: a 429, or a 403 with `x-ratelimit-remaining: 0`; wait for Retry-After, or until `x-ratelimit-reset`. */
      function rateLimitWait(error: unknown): number | null {
        const e = error as OctokitErrorShape;
        const headers = e.response?.headers ?? {};
        if (!(e.status === 429 || (e.status === 403 && headers['x-ratelimit-remaining'] === '0'))) return null;
        if (headers['retry-after']) return retryAfterMs(headers['retry-after'], context.maxRateLimitWaitMs);
        const reset = headers['x-ratelimit-reset'] ? Number(headers['x-ratelimit-reset']) * 1000 - Date.now() : 1_000;
        return Math.min(Math.max(reset, 0), context.maxRateLimitWaitMs);
      }

      const seen = new Set<string>();
      let cursor = context.cursor ?? null;
      for (;;) {
        if (context.maxCalls !== null && calls >= context.maxCalls) return;
        budget.page(cursor);
        const page = await call<DeliverySummary[]>(routes.list, { ...routes.params, per_page: 100, ...(cursor ? { cursor } : {}) });
        hooks.onPage?.(calls);
        let older = false;
        for (const delivery of page.data) {
          const at = Date.parse(delivery.delivered_at);
          if (at > query.until.getTime()) continue;
          if (at < query.since.getTime()) {
            older = true;
            break;
          }
          if (seen.has(delivery.guid)) continue;
          const ok = delivery.status_code >= 200 && delivery.status_code < 300;
          // mutant: github-backfill-ignores-redelivery
          seen.add(delivery.guid);
          // Newest first: a redelivery that succeeded is listed before the failed attempts of its GUID.
          // mutant: github-backfill-lists-delivered
          if (ok && !query.all) continue;
          const type = delivery.action ? `${delivery.event}.${delivery.action}` : delivery.event;
          if (query.types && !query.types.includes(type) && !query.types.includes(delivery.event)) continue;
          const detail = await call<DeliveryDetail>(routes.detail, { ...routes.params, delivery_id: delivery.id });
          yield toItem(eventOf, detail.data, delivery, context.source.name, routes.hookId);
        }
        const link = nextLink(page.headers.link);
        const next = link === null ? null : budget.checkLink(link).searchParams.get('cursor');
        hooks.onCursor?.(older || next === null ? null : next);
        if (older || next === null) return;
        cursor = next;
      }
    },
  });

function toItem(eventOf: EventOf, detail: DeliveryDetail, summary: DeliverySummary, source: string, hookId: string): BackfillItem {
  const headers = new Map(Object.entries(detail.request?.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
  try {
    if (!detail.request?.payload) throw new VerificationError(400, 'malformed_payload', 'GitHub kept no payload for this delivery');
    const event = eventOf(
      source,
      {
        delivery: headers.get('x-github-delivery') ?? summary.guid,
        hookId: headers.get('x-github-hook-id') ?? hookId,
        eventName: headers.get('x-github-event') ?? summary.event,
        targetType: headers.get('x-github-hook-installation-target-type') ?? null,
      },
      Buffer.from(JSON.stringify(detail.request.payload)),
      null,
    );
    return { event };
  } catch (error) {
    if (error instanceof VerificationError) return { refused: { id: `${hookId}:${summary.guid}`, reason: error.message } };
    throw error;
  }
}
