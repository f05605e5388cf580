/**
 * The sandbox behaves like the real APIs where exactly-once depends on it.
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { startSandbox, type SandboxHandle } from '@oncehook/harness';

let sb: SandboxHandle;
beforeAll(async () => {
  sb = await startSandbox();
});
afterAll(async () => {
  await sb.close();
});
beforeEach(() => {
  sb.sandbox.reset();
});

const charge = (key: string | null, body: Record<string, unknown> = { customer: 'cus_1', amount: 500, currency: 'usd' }) =>
  fetch(`${sb.url}/payment/v1/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
    body: JSON.stringify(body),
  });

it('payment: same key and parameters replay the stored response; nothing applied twice', async () => {
  const first = await charge('key-1');
  const second = await charge('key-1');
  expect(first.status).toBe(200);
  expect(second.status).toBe(200);
  expect(second.headers.get('idempotent-replayed')).toBe('true');
  expect(await second.json()).toEqual(await first.json());
  expect(sb.stats().payment).toMatchObject({ applied: 1, replays: 1, appliedByKey: { 'key-1': 1 } });
});

it('payment: same key with different parameters is a 400 idempotency error', async () => {
  await charge('key-2');
  const res = await charge('key-2', { customer: 'cus_1', amount: 999, currency: 'usd' });
  expect(res.status).toBe(400);
  expect(await res.json()).toMatchObject({ error: { type: 'idempotency_error' } });
  expect(sb.stats().payment.applied).toBe(1);
});

it('payment: same key while the first request is in flight is a 409', async () => {
  sb.faults([{ service: 'payment', mode: 'delay', delayMs: 400, times: 1 }]);
  const first = charge('key-3');
  await new Promise((resolve) => setTimeout(resolve, 100));
  const second = await charge('key-3');
  expect(second.status).toBe(409);
  expect((await first).status).toBe(200);
  expect(sb.stats().payment.applied).toBe(1);
});

it('apply_then_fail applies the effect and drops the connection; the retry gets the stored response', async () => {
  sb.faults([{ service: 'payment', mode: 'apply_then_fail', firstAttemptPerKey: true }]);
  await expect(charge('key-4')).rejects.toThrow();
  expect(sb.stats().payment.applied).toBe(1);
  const retry = await charge('key-4');
  expect(retry.status).toBe(200);
  expect(retry.headers.get('idempotent-replayed')).toBe('true');
  expect(sb.stats().payment.applied).toBe(1);
});

it('fail_before applies nothing and stores nothing: the retry applies once', async () => {
  sb.faults([{ service: 'fulfilment', mode: 'fail_before', times: 1 }]);
  const ship = () =>
    fetch(`${sb.url}/fulfilment/shipments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': 's-1' },
      body: JSON.stringify({ order_id: 'o1', items: [] }),
    });
  expect((await ship()).status).toBe(500);
  expect(sb.stats().fulfilment.applied).toBe(0);
  expect((await ship()).status).toBe(200);
  expect(sb.stats().fulfilment.applied).toBe(1);
});

it('email dedupes on its body key; without a key every send is applied (at-least-once)', async () => {
  const send = (key?: string) =>
    fetch(`${sb.url}/email/emails`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ to: 'a@example.com', subject: 'hi', ...(key ? { dedupe_key: key } : {}) }),
    });
  await send('e-1');
  await send('e-1');
  expect(sb.stats().email.applied).toBe(1);
  await send();
  await send();
  expect(sb.stats().email.applied).toBe(3);
});

it('payment without a key is applied every time, like the real API', async () => {
  await charge(null);
  await charge(null);
  expect(sb.stats().payment.applied).toBe(2);
});
