/**
 * The provider simulator: delivers signed events the way real providers do, and records what
 * it was told for every delivery.
 *
 * - Signs every delivery afresh (new timestamp, new signature), with the official SDKs
 *   (Stripe, GitHub, Standard Webhooks) via test/helpers/providers.ts.
 * - Duplicates realistically: each event is delivered `copies` times (a mean of 3), some of them
 *   concurrently, the rest as later redeliveries.
 * - Retries each delivery on a network error, a timeout or a non-2xx answer, with exponential
 *   backoff (as providers do), up to `maxTries`.
 * - Mixes in deliveries with invalid signatures (expected: 4xx, never stored), and can send
 *   events that are ONLY ever forged (never acknowledged: they must leave no trace).
 */
import type { Delivery } from './net.js';
import { PROVIDER_CASES, SECRETS, type ProviderCase } from './providers.js';

export type SimSource = 'stripe' | 'github' | 'standard-webhooks';

export interface SimEvent {
  /** Unique key of the event in this run (source/id). */
  key: string;
  source: SimSource;
  /** The provider's stable id (what Oncehook keys on, before any source-specific prefix). */
  id: string;
  body: string;
  /** Forged-only: never validly signed. */
  forged: boolean;
}

export type DeliveryAnswer = number | 'network' | 'timeout';

export interface EventOutcome {
  event: SimEvent;
  /** Answers to validly signed deliveries, in order (each retry is one answer). */
  answers: DeliveryAnswer[];
  /** Answers to deliberately invalid deliveries. */
  invalidAnswers: DeliveryAnswer[];
  acknowledged: boolean;
}

export interface SimulatorOptions {
  /** Where ingest is now (it may move if restarted on another port; here it does not). */
  baseUrl: string;
  timeoutMs?: number;
  maxTries?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Share of events that also get one invalidly signed delivery. */
  invalidShare?: number;
}

const CASES = new Map<SimSource, ProviderCase>((['stripe', 'github', 'standard-webhooks'] as const).map((source) => [source, PROVIDER_CASES.find((c) => c.source === source)!]));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The secrets an ingest process needs to accept the simulator's three sources. */
export function simulatorSourcesEnv(): Record<string, string> {
  return { STRIPE_WEBHOOK_SECRET: SECRETS.stripe, GITHUB_WEBHOOK_SECRET: SECRETS.github, STANDARD_WEBHOOKS_SECRET: SECRETS.standard };
}

/** A realistic payload per source; Stripe and Standard Webhooks events cause effects. */
export function makeEvent(source: SimSource, n: number, run: string, forged = false): SimEvent {
  const id = `${source === 'github' ? 'gh' : source === 'stripe' ? 'evt' : 'msg'}_${run}_${n}`;
  let body: string;
  if (source === 'stripe') {
    body = JSON.stringify({
      id,
      object: 'event',
      type: 'payment_intent.succeeded',
      created: Math.floor(Date.now() / 1000),
      data: {
        object: {
          id: `pi_${id}`,
          amount: 1500,
          amount_received: 1500,
          currency: 'usd',
          customer: `cus_${n % 50}`,
          receipt_email: `buyer${n}@example.com`,
          metadata: { order_id: `order_${id}`, order_total: '1500', address: `${n} Chaos St`, sku: 'sku-chaos' },
        },
      },
    });
  } else if (source === 'standard-webhooks') {
    body = JSON.stringify({
      type: 'subscription.renewed',
      timestamp: new Date().toISOString(),
      data: { subscription_id: `sub_${id}`, customer_id: `cus_sub_${n % 50}`, amount: 900, currency: 'usd' },
    });
  } else {
    body = JSON.stringify({ action: 'opened', issue: { number: n }, repository: { full_name: 'acme/app' } });
  }
  return { key: `${source}/${id}`, source, id, body, forged };
}

/** The stable id Oncehook stores for a simulated event. */
export function storedIdOf(event: SimEvent): string {
  return CASES.get(event.source)!.storedId(event.id);
}

export class ProviderSimulator {
  readonly outcomes = new Map<string, EventOutcome>();
  readonly options: Required<SimulatorOptions>;

  constructor(options: SimulatorOptions) {
    this.options = { timeoutMs: 5_000, maxTries: 30, retryBaseMs: 100, retryMaxMs: 3_000, invalidShare: 0.05, ...options };
  }

  private async sign(event: SimEvent, valid: boolean): Promise<Delivery> {
    const c = CASES.get(event.source)!;
    const secret = valid ? undefined : event.source === 'standard-webhooks' ? `whsec_${Buffer.from('forged-key-forged-key-32-bytes!!').toString('base64')}` : 'forged-secret';
    return c.sign(event.body, { id: event.id, secret });
  }

  private async post(event: SimEvent, delivery: Delivery): Promise<DeliveryAnswer> {
    try {
      const res = await fetch(`${this.options.baseUrl}/webhooks/${event.source}`, {
        method: 'POST',
        body: delivery.body,
        headers: delivery.headers,
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      await res.arrayBuffer();
      return res.status;
    } catch (error) {
      return (error as Error).name === 'TimeoutError' ? 'timeout' : 'network';
    }
  }

  private outcome(event: SimEvent): EventOutcome {
    let outcome = this.outcomes.get(event.key);
    if (!outcome) {
      outcome = { event, answers: [], invalidAnswers: [], acknowledged: false };
      this.outcomes.set(event.key, outcome);
    }
    return outcome;
  }

  /** One delivery with the provider's retry loop: until a 2xx, a 4xx (given up), or out of tries. */
  async deliverOnce(event: SimEvent): Promise<DeliveryAnswer> {
    const outcome = this.outcome(event);
    let answer: DeliveryAnswer = 'network';
    for (let attempt = 1; attempt <= this.options.maxTries; attempt += 1) {
      answer = await this.post(event, await this.sign(event, !event.forged));
      (event.forged ? outcome.invalidAnswers : outcome.answers).push(answer);
      if (typeof answer === 'number' && answer >= 200 && answer < 300) {
        if (!event.forged) outcome.acknowledged = true;
        return answer;
      }
      if (typeof answer === 'number' && answer >= 400 && answer < 500) return answer; // providers stop on most 4xx
      await sleep(Math.min(this.options.retryMaxMs, this.options.retryBaseMs * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2));
    }
    return answer;
  }

  /** An invalidly signed delivery (no retries: it should get a 4xx). */
  async deliverInvalid(event: SimEvent): Promise<DeliveryAnswer> {
    const answer = await this.post(event, await this.sign(event, false));
    this.outcome(event).invalidAnswers.push(answer);
    return answer;
  }

  /**
   * Delivers an event `copies` times: sometimes two at once (concurrent duplicates), the rest
   * one after the other (retries and redeliveries), plus, for a share of events, one forged copy.
   */
  async deliverEvent(event: SimEvent, copies: number): Promise<void> {
    this.outcome(event);
    const concurrent = copies >= 2 && Math.random() < 0.5 ? 2 : 1;
    const tasks: Promise<unknown>[] = [];
    for (let i = 0; i < concurrent; i += 1) tasks.push(this.deliverOnce(event));
    if (!event.forged && Math.random() < this.options.invalidShare) tasks.push(this.deliverInvalid(event));
    await Promise.all(tasks);
    for (let i = concurrent; i < copies; i += 1) {
      await sleep(Math.random() * 50);
      await this.deliverOnce(event);
    }
  }
}

/** Runs `fn` over items with at most `concurrency` at once. */
export async function pool<T>(items: T[], concurrency: number, fn: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const index = next;
      next += 1;
      await fn(items[index]!, index);
    }
  });
  await Promise.all(workers);
}

/** 1 to 5 deliveries, mean 3. */
export function copiesFor(): number {
  return 1 + Math.floor(Math.random() * 5);
}
