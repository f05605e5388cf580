/**
 * What the admin-facing scenarios share (admin-searches in round-three.ts, queue-page in
 * queue-page.ts): signed deliveries timed one at a time and in bursts, and the same deliveries
 * again beside N admin clients in a process of their own (admin-clients.ts, so this process
 * only times the deliveries), with /readyz watched meanwhile.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { paymentSucceeded, signStripe, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { count, spread } from './common.js';

const ADMIN_CLIENTS = fileURLToPath(new URL('./admin-clients.ts', import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface Answer {
  status: number;
  ms: number;
}

/** 20 signed deliveries one at a time, then 3 bursts of 50 at once: each one's answer and time. */
export async function timedDeliveries(url: string): Promise<{ one: Answer[]; bursts: Answer[] }> {
  const deliverOne = async (): Promise<Answer> => {
    const delivery = signStripe(paymentSucceeded(`evt_beside_${randomBytes(6).toString('hex')}`));
    const started = performance.now();
    const response = await fetch(`${url}/webhooks/stripe`, { method: 'POST', body: delivery.body, headers: delivery.headers }).catch(() => null);
    await response?.arrayBuffer();
    return { status: response?.status ?? 0, ms: performance.now() - started };
  };
  const one: Answer[] = [];
  for (let i = 0; i < 20; i += 1) one.push(await deliverOne());
  const bursts: Answer[] = [];
  for (let b = 0; b < 3; b += 1) bursts.push(...(await Promise.all(Array.from({ length: 50 }, deliverOne))));
  return { one, bursts };
}

/** The deliveries' figures as one line's text. */
export function describeDeliveries({ one, bursts }: { one: Answer[]; bursts: Answer[] }): string {
  return `one at a time ${JSON.stringify(count(one))} ${spread(one.map((a) => a.ms))}; bursts of 50 ${JSON.stringify(count(bursts))} ${spread(bursts.map((a) => a.ms))}`;
}

/**
 * timedDeliveries beside `clients` admin clients using `tokens` in `mode` (admin-clients.ts),
 * started 2 s before: the deliveries' line, /readyz's failures and the clients' answers.
 */
export async function deliveriesBesideAdmins(url: string, clients: number, tokens: string[], mode: 'search' | 'queue-page'): Promise<string> {
  let running = true;
  const attackers = spawn(process.execPath, [...SOURCE_NODE_ARGS, ADMIN_CLIENTS, url, String(clients), tokens.join(','), mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let printed = '';
  attackers.stdout.on('data', (chunk: Buffer) => (printed += chunk.toString()));
  const ready: number[] = [];
  const readyWatch = (async () => {
    while (running) {
      ready.push((await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(10_000) }).catch(() => null))?.status ?? 0);
      await sleep(500);
    }
  })();
  await sleep(2_000);
  const during = await timedDeliveries(url);
  running = false;
  const exited = new Promise((resolve) => attackers.once('close', resolve));
  attackers.kill('SIGTERM');
  await Promise.all([exited, readyWatch]);
  const answered = printed.trim().split('\n').pop() ?? '{}';
  return `${describeDeliveries(during)}; /readyz ${ready.filter((s) => s !== 200).length} of ${ready.length} not 200; ${mode === 'search' ? 'searches' : 'pages'} answered ${answered}`;
}
