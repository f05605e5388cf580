/**
 * Deliveries for every built-in provider, signed by the provider's official SDK where one
 * exists (Stripe `stripe`, GitHub `@octokit/webhooks-methods`, Standard Webhooks
 * `standardwebhooks`, Svix `svix`, Shopify's own test helper `getHmac`) and by the documented
 * scheme otherwise (Slack, Paddle, our generic HMAC).
 */
import { createHmac } from 'node:crypto';
import { sign as githubSign } from '@octokit/webhooks-methods';
import { getHmac as shopifyHmac } from '@shopify/shopify-api/test-helpers';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { Webhook as SvixWebhook } from 'svix';
import { createSource, type SourceDeclaration, type WebhookSource } from '@oncehook/providers';
import { type Delivery, postDelivery } from './net.js';
import type { ProviderCase, SignOptions } from './provider-case.js';
import { signStripe, STRIPE_SECRET } from './stripe.js';
import { SENDER_CASES, SENDER_DECLARATIONS, type SenderCase } from './sender-cases.js';

export const SECRETS = {
  stripe: STRIPE_SECRET,
  stripeEu: 'whsec_second_stripe_account',
  github: 'github-webhook-secret',
  shopify: 'shpss_shopify_client_secret',
  standard: `whsec_${Buffer.from('standard-webhooks-test-key-32byte').toString('base64')}`,
  svix: `whsec_${Buffer.from('svix-test-key-of-thirty-two-bytes').toString('base64')}`,
  slack: 'slack-signing-secret',
  paddle: 'pdl_ntfset_paddle_secret',
  hmac: 'in-house-signing-secret',
} as const;

export const SOURCE_DECLARATIONS: SourceDeclaration[] = [
  { name: 'stripe', kind: 'stripe', secrets: [SECRETS.stripe] },
  { name: 'stripe-eu', kind: 'stripe', secrets: [SECRETS.stripeEu] },
  { name: 'github', kind: 'github', secrets: [SECRETS.github] },
  { name: 'shopify', kind: 'shopify', secrets: [SECRETS.shopify] },
  { name: 'standard-webhooks', kind: 'standard-webhooks', secrets: [SECRETS.standard] },
  { name: 'svix', kind: 'standard-webhooks', secrets: [SECRETS.svix] },
  { name: 'slack', kind: 'slack', secrets: [SECRETS.slack] },
  { name: 'paddle', kind: 'paddle', secrets: [SECRETS.paddle] },
  {
    name: 'internal',
    kind: 'hmac',
    secrets: [SECRETS.hmac],
    signatureHeader: 'X-Internal-Signature',
    encoding: 'hex',
    signaturePrefix: 'sha256=',
    timestampHeader: 'X-Internal-Timestamp',
    id: { field: 'event.id' },
    type: { field: 'event.kind' },
  },
];

export function allSources(): Map<string, WebhookSource> {
  return new Map([...SOURCE_DECLARATIONS, ...SENDER_DECLARATIONS].map((declaration) => [declaration.name, createSource(declaration, {})]));
}

export type { ProviderCase, SignOptions } from './provider-case.js';

const now = () => Math.floor(Date.now() / 1000);
const hex = (secret: string, ...parts: (string | Buffer)[]) => {
  const mac = createHmac('sha256', secret);
  for (const part of parts) mac.update(part);
  return mac.digest('hex');
};
const JSON_TYPE = { 'content-type': 'application/json' };

/** The signer of a scheme that signs a timestamp: the case's own (for tolerance cases) or now. */
const signedAt =
  (headers: (timestamp: number, body: string | Buffer, o: SignOptions) => Record<string, string>): ProviderCase['sign'] =>
  async (body, o) => {
    const timestamp = o.timestamp ?? now();
    return { body, headers: { ...JSON_TYPE, ...headers(timestamp, body, o) } };
  };

const ADAPTER_CASES: ProviderCase[] = [
  {
    source: 'stripe',
    body: (id) => JSON.stringify({ id, object: 'event', type: 'invoice.paid', created: now(), data: { object: { id: 'in_1' } } }),
    sign: async (body, o) => signStripe(body.toString(), { secret: o.secret ?? SECRETS.stripe, timestamp: o.timestamp }),
    storedId: (id) => id,
    type: 'invoice.paid',
    timestamped: true,
  },
  {
    source: 'github',
    body: () => JSON.stringify({ action: 'opened', issue: { number: 1 }, repository: { full_name: 'acme/app' } }),
    sign: async (body, o) => ({
      body,
      headers: {
        ...JSON_TYPE,
        'x-hub-signature-256': await githubSign(o.secret ?? SECRETS.github, body.toString()),
        'x-github-delivery': o.id,
        'x-github-hook-id': '424242',
        'x-github-event': 'issues',
        ...(o.attempt ? { 'x-github-redelivery': 'true' } : {}),
      },
    }),
    storedId: (id) => `424242:${id}`,
    type: 'issues.opened',
    timestamped: false,
  },
  {
    source: 'shopify',
    // Shopify's ids exceed 2^53: the raw JSON keeps every digit, as Shopify's bodies do.
    body: () => '{"id":820982911946154508,"email":"jon@example.com","total_price":"10.00"}',
    sign: async (body, o) => ({
      body,
      headers: {
        ...JSON_TYPE,
        'x-shopify-hmac-sha256': shopifyHmac(body.toString(), o.secret ?? SECRETS.shopify),
        'x-shopify-webhook-id': o.id,
        'x-shopify-event-id': `event-${o.id}`,
        'x-shopify-topic': 'orders/create',
        'x-shopify-shop-domain': 'acme.myshopify.com',
        'x-shopify-triggered-at': new Date().toISOString(),
      },
    }),
    storedId: (id) => id,
    type: 'orders/create',
    timestamped: false,
  },
  {
    source: 'standard-webhooks',
    body: () => JSON.stringify({ type: 'invoice.created', timestamp: new Date().toISOString(), data: { id: 'inv_1' } }),
    sign: signedAt((timestamp, body, o) => ({
      'webhook-id': o.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': new StandardWebhook(o.secret ?? SECRETS.standard).sign(o.id, new Date(timestamp * 1000), body.toString()),
    })),
    storedId: (id) => id,
    type: 'invoice.created',
    timestamped: true,
  },
  {
    source: 'svix',
    body: () => JSON.stringify({ type: 'user.created', data: { id: 'user_1' } }),
    sign: signedAt((timestamp, body, o) => ({
      'svix-id': o.id,
      'svix-timestamp': String(timestamp),
      'svix-signature': new SvixWebhook(o.secret ?? SECRETS.svix).sign(o.id, new Date(timestamp * 1000), body.toString()),
    })),
    storedId: (id) => id,
    type: 'user.created',
    timestamped: true,
  },
  {
    source: 'slack',
    body: (id) => JSON.stringify({ type: 'event_callback', event_id: id, event_time: now(), team_id: 'T1', api_app_id: 'A1', event: { type: 'app_mention', text: 'hi' } }),
    sign: signedAt((timestamp, body, o) => ({
      'x-slack-request-timestamp': String(timestamp),
      'x-slack-signature': `v0=${hex(o.secret ?? SECRETS.slack, `v0:${timestamp}:`, body)}`,
      ...(o.attempt ? { 'x-slack-retry-num': String(o.attempt), 'x-slack-retry-reason': 'http_timeout' } : {}),
    })),
    storedId: (id) => id,
    type: 'app_mention',
    timestamped: true,
  },
  {
    source: 'paddle',
    body: (id) => JSON.stringify({ event_id: id, event_type: 'subscription.renewed', occurred_at: new Date().toISOString(), notification_id: 'ntf_1', data: { id: 'sub_1' } }),
    sign: signedAt((timestamp, body, o) => ({ 'paddle-signature': `ts=${timestamp};h1=${hex(o.secret ?? SECRETS.paddle, `${timestamp}:`, body)}` })),
    storedId: (id) => id,
    type: 'subscription.renewed',
    timestamped: true,
  },
  {
    source: 'internal',
    body: (id) => JSON.stringify({ event: { id, kind: 'order.paid' }, order: { id: 'o_1' } }),
    sign: signedAt((timestamp, body, o) => ({
      'x-internal-timestamp': String(timestamp),
      'x-internal-signature': `sha256=${hex(o.secret ?? SECRETS.hmac, `${timestamp}.`, body)}`,
    })),
    storedId: (id) => id,
    type: 'order.paid',
    timestamped: true,
  },
];

/** Every built-in sender's case: the adapters', then the table senders' (sender-cases.ts). */
export const PROVIDER_CASES: SenderCase[] = [...ADAPTER_CASES, ...SENDER_CASES];

export async function send(baseUrl: string, source: string, delivery: Delivery): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await postDelivery(`${baseUrl}/webhooks/${source}`, { body: delivery.body, headers: delivery.headers });
  const text = await response.text();
  try {
    return { status: response.status, json: JSON.parse(text) as Record<string, unknown> };
  } catch {
    return { status: response.status, json: { raw: text } };
  }
}
