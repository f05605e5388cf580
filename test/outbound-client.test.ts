/**
 * The outbound client against real HTTP servers: what it retries, what it never retries, and
 * how it waits.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { createOutboundClient, OutboundUnavailableError, parseRetryAfter, PermanentError } from '@oncehook/sdk';

/** A server answering from a script of (status, headers, delayMs) per request; records keys. */
async function scripted(script: { status: number; headers?: Record<string, string>; delayMs?: number; body?: unknown }[]) {
  const seen: { key: string | undefined; at: number }[] = [];
  const server = http.createServer((req, res) => {
    seen.push({ key: req.headers['idempotency-key'] as string | undefined, at: Date.now() });
    const step = script[Math.min(seen.length - 1, script.length - 1)]!;
    setTimeout(() => {
      if (res.destroyed) return;
      res.writeHead(step.status, { 'content-type': 'application/json', ...step.headers });
      res.end(JSON.stringify(step.body ?? { ok: step.status < 300 }));
    }, step.delayMs ?? 0);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}
const servers: http.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

// A per-try timeout far above any answer here: only the timeout test sets a short one. (At
// 300 ms for every test, a busy machine timed out a scripted 503, which used up a step of the
// script, and the retry test ended on the 409: a timing, not the behaviour under test.)
const client = (url: string, extra: Partial<Parameters<typeof createOutboundClient>[0]> = {}) =>
  createOutboundClient({ name: 'payment', baseUrl: url, timeoutMs: 10_000, maxTries: 4, baseDelayMs: 10, maxDelayMs: 2_000, ...extra });

it('retries 5xx, 429 and 409 with the same idempotency key, then succeeds', async () => {
  const server = await scripted([{ status: 503 }, { status: 429 }, { status: 409 }, { status: 200, body: { id: 'ch_1' } }]);
  const res = await client(server.url).request<{ id: string }>({ method: 'POST', path: '/v1/charges', body: {}, idempotencyKey: 'k-1' });
  expect(res.body).toEqual({ id: 'ch_1' });
  expect(server.seen.map((s) => s.key)).toEqual(['k-1', 'k-1', 'k-1', 'k-1']);
});

it('never retries another 4xx: PermanentError after one request', async () => {
  const server = await scripted([{ status: 400, body: { error: 'card_declined' } }]);
  await expect(client(server.url).request({ method: 'POST', path: '/v1/charges', idempotencyKey: 'k' })).rejects.toThrow(PermanentError);
  expect(server.seen).toHaveLength(1);
});

it('retries a timeout, and gives up with OutboundUnavailableError when tries run out', async () => {
  const server = await scripted([{ status: 200, delayMs: 1_000 }]);
  const error = await client(server.url, { maxTries: 2, timeoutMs: 300 })
    .request({ method: 'POST', path: '/x', idempotencyKey: 'k' })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(OutboundUnavailableError);
  expect((error as Error).message).toMatch(/failed 2 times; last: timed out after 300ms/);
  expect(server.seen).toHaveLength(2);
});

it('retries network errors (connection refused)', async () => {
  const error = await client('http://127.0.0.1:9', { maxTries: 3 })
    .request({ method: 'POST', path: '/x', idempotencyKey: 'k' })
    .catch((e: unknown) => e);
  expect(error).toBeInstanceOf(OutboundUnavailableError);
  expect((error as Error).message).toMatch(/network error/);
});

it('honours Retry-After before the next try', async () => {
  const server = await scripted([{ status: 503, headers: { 'retry-after': '1' } }, { status: 200 }]);
  await client(server.url).request({ method: 'POST', path: '/x', idempotencyKey: 'k' });
  const gap = server.seen[1]!.at - server.seen[0]!.at;
  expect(gap).toBeGreaterThanOrEqual(950); // the server asked for 1 s; jitter alone would be ~10 ms
});

it('parses Retry-After as seconds or an HTTP date', () => {
  expect(parseRetryAfter('3')).toBe(3000);
  expect(parseRetryAfter(new Date(Date.now() + 5_000).toUTCString(), Date.now())).toBeGreaterThan(3_000);
  expect(parseRetryAfter('soon')).toBeNull();
  expect(parseRetryAfter(null)).toBeNull();
});
