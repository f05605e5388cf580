/**
 * A provider's API (or something posing as it) cannot take a backfill anywhere it likes, nor
 * keep it reading forever (issue 63, F5 and F7): stand-ins of the Stripe, Paddle and GitHub APIs,
 * real HTTP servers, answer as an attacker would, and the listing stops with a message that says
 * which bound held, having sent the key nowhere but the API's own origin.
 *
 * - Paddle's `pagination.next` on another host: never called, never reported as the cursor.
 * - GitHub's Link header to another host: never called.
 * - `has_more` forever with the same cursor: stopped at the repeat; with new cursors: stopped at
 *   the page cap.
 * - One page larger than the per-answer cap, declared or streamed; answers larger in all than
 *   the listing's cap.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { paymentSucceeded } from '@oncehook/harness';
import { BackfillApiError, type BackfillContext, type BackfillItem, providerOf } from '@oncehook/providers';
import { afterEach, describe, expect, it } from 'vitest';

interface StandIn {
  url: string;
  calls: { url: string; authorization: string | undefined }[];
  close(): Promise<void>;
}

const open: StandIn[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function standIn(answer: (req: IncomingMessage, res: ServerResponse, n: number) => void): Promise<StandIn> {
  const calls: StandIn['calls'] = [];
  const server = createServer((req, res) => {
    calls.push({ url: req.url ?? '', authorization: req.headers.authorization });
    answer(req, res, calls.length);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const handle = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  open.push(handle);
  return handle;
}

const json = (res: ServerResponse, body: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

const KEYS = { STRIPE_API_KEY: 'rk_test_boundscheck0001', PADDLE_API_KEY: 'pdl_sdbx_apikey_boundscheck0000001', GITHUB_API_TOKEN: 'ghp_boundscheck0000000001' };

async function list(kind: 'stripe' | 'paddle' | 'github', env: Record<string, string>, extra: Partial<BackfillContext> = {}) {
  const api = providerOf(kind).backfill!;
  const cursors: (string | null)[] = [];
  const items: BackfillItem[] = [];
  let error: unknown = null;
  try {
    for await (const item of api.list(
      { env: { ...KEYS, ...env }, source: { name: kind, kind }, maxCalls: null, maxRateLimitWaitMs: 10, ...extra },
      { since: new Date(Date.now() - 3_600_000), until: new Date(), types: null, all: true },
      { onCursor: (c) => cursors.push(c) },
    ))
      items.push(item);
  } catch (e) {
    error = e;
  }
  return { items, cursors, error: error as BackfillApiError | null };
}

let n = 0;
const nextId = () => {
  n += 1;
  return `evt_bounds_${n}`;
};
const stripePage = (count: number, opts: { sameIds?: boolean } = {}) => ({
  object: 'list',
  url: '/v1/events',
  has_more: true,
  data: Array.from({ length: count }, (_, i) => paymentSucceeded(opts.sameIds ? `evt_same_${i}` : nextId())),
});

describe('backfill stays on the API and within its bounds', () => {
  it("Paddle's next link to another host: the key is never sent there, the link is not kept as the cursor", async () => {
    const elsewhere = await standIn((_req, res) => json(res, { data: [], meta: { pagination: { next: null, has_more: false } } }));
    const paddle = await standIn((_req, res) =>
      json(res, {
        data: [
          {
            id: 'ntf_1',
            type: 'transaction.completed',
            status: 'failed',
            payload: { event_id: 'evt_p1', event_type: 'transaction.completed', occurred_at: new Date().toISOString(), notification_id: 'ntf_1', data: { id: 'txn_1' } },
          },
        ],
        meta: { pagination: { next: `${elsewhere.url}/notifications?after=ntf_1`, has_more: true } },
      }),
    );
    const result = await list('paddle', { PADDLE_API_BASE: paddle.url });
    expect(result.error).toBeInstanceOf(BackfillApiError);
    expect(result.error!.message).toMatch(/Paddle's API sent a next-page link to http:\/\/127\.0\.0\.1:\d+, not its own origin .*the key stays with the API/);
    expect(elsewhere.calls).toHaveLength(0);
    expect(result.cursors).toEqual([]);
    expect(result.items).toHaveLength(1);
    // A stored cursor on another origin (written before this check) is refused before any call.
    const stored = await list('paddle', { PADDLE_API_BASE: paddle.url }, { cursor: `${elsewhere.url}/notifications?after=x` });
    expect(stored.error!.message).toMatch(/not its own origin/);
    expect(elsewhere.calls).toHaveLength(0);
  });

  it("GitHub's Link header to another host is not followed", async () => {
    const elsewhere = await standIn((_req, res) => json(res, []));
    const github = await standIn((_req, res) =>
      json(res, [{ id: 1, guid: 'g1', delivered_at: new Date().toISOString(), status_code: 200, event: 'push', action: null }], {
        link: `<${elsewhere.url}/repos/o/r/hooks/1/deliveries?cursor=abc>; rel="next"`,
      }),
    );
    const result = await list('github', { GITHUB_API_BASE: github.url, GITHUB_BACKFILL_HOOK: 'o/r/1' }, {});
    expect(result.error!.message).toMatch(/GitHub's API sent a next-page link to http:\/\/127\.0\.0\.1:\d+, not its own origin/);
    expect(elsewhere.calls).toHaveLength(0);
    expect(github.calls.every((c) => c.authorization === `token ${KEYS.GITHUB_API_TOKEN}`)).toBe(true);
  });

  it('has_more forever: the same cursor twice stops at once; new cursors stop at the page cap', async () => {
    const repeating = await standIn((_req, res) => json(res, stripePage(3, { sameIds: true })));
    const same = await list('stripe', { STRIPE_API_BASE: repeating.url });
    expect(same.error!.message).toMatch(/Stripe's API sent the same page cursor twice \(evt_same_2\): stopped/);
    expect(repeating.calls).toHaveLength(2);
    const endless = await standIn((_req, res) => json(res, stripePage(2)));
    const capped = await list('stripe', { STRIPE_API_BASE: endless.url }, { limits: { maxPages: 7 } });
    expect(capped.error!.message).toMatch(/stopped after 7 pages \(at most 7 per listing\): list a shorter window .* --max-pages/);
    expect(endless.calls).toHaveLength(7);
    expect(capped.items).toHaveLength(14);
  });

  it('a page over the per-answer cap (declared or streamed) and answers over the listing cap stop the listing', async () => {
    const big = JSON.stringify(stripePage(1)).replace('"livemode":false', `"livemode":false,"padding":"${'x'.repeat(3_000_000)}"`);
    const declared = await standIn((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(big.length) }).end(big));
    const one = await list('stripe', { STRIPE_API_BASE: declared.url }, { limits: { maxResponseBytes: 1_000_000 } });
    expect(one.error!.message).toMatch(/Stripe's API answered more than 1000000 bytes in one page: stopped/);
    // Stripe's client retries a failed connection; the budget refuses its retries unsent.
    expect(declared.calls).toHaveLength(1);
    const streamed = await standIn((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(big.slice(0, 1_500_000));
      res.end(big.slice(1_500_000));
    });
    const chunked = await list('stripe', { STRIPE_API_BASE: streamed.url }, { limits: { maxResponseBytes: 1_000_000 } });
    expect(chunked.error!.message).toMatch(/more than 1000000 bytes in one page/);
    const pages = await standIn((_req, res) => json(res, stripePage(50)));
    const total = await list('stripe', { STRIPE_API_BASE: pages.url }, { limits: { maxBytes: 100_000 } });
    expect(total.error!.message).toMatch(/Stripe's API answered more than 100000 bytes in this listing: stopped; list a shorter window/);
    expect(pages.calls.length).toBeLessThan(10);
  });

  it('an API base at a metadata address is never called, whatever form it takes', async () => {
    for (const base of ['http://169.254.169.254', 'http://[::ffff:a9fe:a9fe]', 'http://100.100.100.200']) {
      const result = await list('paddle', { PADDLE_API_BASE: base });
      expect(result.error, base).toBeInstanceOf(BackfillApiError);
      expect(result.error!.message, base).toMatch(/a (link-local|cloud metadata) address/);
    }
  });
});
