/**
 * Deliveries of the table senders (@oncehook/shared senders.ts), signed by code written here
 * from each sender's documentation, NOT from the scheme table; and where the sender publishes
 * a verifier on npm, that official verifier must accept the delivery before it is sent (it
 * throws otherwise): Linear `@linear/sdk`, HubSpot `@hubspot/api-client`, Square `square`,
 * SendGrid `@sendgrid/eventwebhook`, Discord `discord-interactions`, Twilio `twilio`.
 */
import { createHash, createHmac, generateKeyPairSync, randomBytes, randomUUID, sign, type KeyObject } from 'node:crypto';
// The official verifiers are loaded when a case first signs, not when the harness is imported:
// several are large (twilio, square, @hubspot/api-client), and most test files never sign.
const load = <T>(loader: () => Promise<T>) => {
  let loaded: Promise<T> | undefined;
  return () => {
    loaded ??= loader();
    return loaded;
  };
};
const hubspotLib = load(() => import('@hubspot/api-client'));
const linearLib = load(() => import('@linear/sdk/webhooks'));
const sendgridLib = load(() => import('@sendgrid/eventwebhook'));
const discordLib = load(() => import('discord-interactions'));
const squareLib = load(() => import('square'));
const twilioLib = load(async () => (await import('twilio')).default);
import type { SourceDeclaration } from '@oncehook/providers';
import type { Delivery } from './net.js';
import type { ProviderCase, SignOptions } from './provider-case.js';

const now = () => Math.floor(Date.now() / 1000);
const mac = (algorithm: string, key: string, data: string, encoding: 'hex' | 'base64') => createHmac(algorithm, key).update(data).digest(encoding);
const json = { 'content-type': 'application/json' };
const sha256 = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;

function keyPair(type: 'ed25519' | 'ec'): { publicKey: KeyObject; privateKey: KeyObject } {
  return type === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
}
const discordKeys = keyPair('ed25519');
const sendgridKeys = keyPair('ec');
const DISCORD_PUBLIC = discordKeys.publicKey.export({ format: 'der', type: 'spki' }).subarray(12).toString('hex');
const SENDGRID_PUBLIC = sendgridKeys.publicKey.export({ format: 'der', type: 'spki' }).toString('base64');

export const SENDER_SECRETS = {
  linear: 'lin_wh_linear-signing-secret',
  intercom: 'intercom-client-secret-0001',
  hubspot: 'hubspot-app-client-secret-1',
  square: 'square-signature-key-000001',
  sendgrid: SENDGRID_PUBLIC,
  mailgun: 'key-mailgun-webhook-signing',
  postmark: 'oncehook:postmark-basic-password',
  gitlab: 'gitlab-secret-token-000001',
  bitbucket: 'bitbucket-webhook-secret-01',
  sentry: 'sentry-integration-secret-01',
  vercel: 'vercel-webhook-secret-00001',
  typeform: 'typeform-webhook-secret-001',
  calendly: 'calendly-webhook-signing-key',
  lemonsqueezy: 'lemon-squeezy-signing-secret',
  woocommerce: 'woocommerce-webhook-secret-1',
  'coinbase-commerce': 'coinbase-commerce-secret-01',
  zoom: 'zoom-webhook-secret-token-01',
  twitch: 'twitch-eventsub-secret-0001',
  meta: 'meta-app-secret-00000000001',
  discord: DISCORD_PUBLIC,
  paystack: 'sk_test_paystack_secret_key_1',
  razorpay: 'razorpay-webhook-secret-001',
  mux: 'mux-webhook-signing-secret-1',
  twilio: 'twilio-auth-token-000000000001',
} as const;
export const HUBSPOT_URL = 'https://hooks.example.com/webhooks/hubspot';
export const SQUARE_URL = 'https://hooks.example.com/webhooks/square';
export const META_VERIFY_TOKEN = 'meta-verify-token-of-the-app';
export const TWILIO_URL = 'https://hooks.example.com/webhooks/twilio?tenant=acme';

export const SENDER_DECLARATIONS: SourceDeclaration[] = Object.entries(SENDER_SECRETS).map(([kind, secret]) => ({
  name: kind,
  kind: kind as 'linear',
  secrets: [secret],
  ...(kind === 'hubspot'
    ? { url: HUBSPOT_URL }
    : kind === 'square'
      ? { url: SQUARE_URL }
      : kind === 'twilio'
        ? { url: TWILIO_URL }
        : kind === 'meta'
          ? { verifyToken: META_VERIFY_TOKEN }
          : {}),
}));

/** What differs per sender beyond ProviderCase: which refusal a wrong secret gets, whether the body is authenticated. */
export interface SenderCase extends ProviderCase {
  /** The error of a wrong secret (default bad_signature). */
  rejection?: string;
  /** False for token/Basic senders and Mailgun: the signature does not cover the body. */
  authenticatesBody?: boolean;
  tolerance?: number;
  batch?: boolean;
}

type Sign = (body: string, o: SignOptions) => Promise<Delivery>;
const wrong = (o: SignOptions) => o.secret !== undefined;

function hmacCase(
  source: keyof typeof SENDER_SECRETS,
  type: string,
  body: (id: string) => string,
  sign: Sign,
  storedId: (id: string) => string = (id) => id,
  extra: Partial<SenderCase> = {},
): SenderCase {
  return { source, type, body, sign: (b, o) => sign(b.toString(), o), storedId, timestamped: false, ...extra };
}

export const SENDER_CASES: SenderCase[] = [
  hmacCase(
    'linear',
    'Issue.create',
    (id) => JSON.stringify({ action: 'create', type: 'Issue', createdAt: new Date().toISOString(), data: { id, title: 'Charge once' }, webhookTimestamp: 0 }),
    async (text, o) => {
      // The send time is in the signed body (ms): set per attempt.
      const body = text.replace(/"webhookTimestamp":\d+/, `"webhookTimestamp":${(o.timestamp ?? now()) * 1000}`);
      const signature = mac('sha256', o.secret ?? SENDER_SECRETS.linear, body, 'hex');
      if (!wrong(o) && o.timestamp === undefined && !new (await linearLib()).LinearWebhookClient(SENDER_SECRETS.linear).verify(Buffer.from(body), signature))
        throw new Error('@linear/sdk rejects');
      return { body, headers: { ...json, 'linear-signature': signature, 'linear-delivery': o.id, 'linear-event': 'Issue' } };
    },
    (id) => id,
    { timestamped: true, tolerance: 60 },
  ),
  hmacCase(
    'intercom',
    'conversation.user.created',
    (id) => JSON.stringify({ type: 'notification_event', id, topic: 'conversation.user.created', created_at: now(), data: { item: { type: 'conversation', id: '1' } } }),
    async (body, o) => ({ body, headers: { ...json, 'x-hub-signature': `sha1=${mac('sha1', o.secret ?? SENDER_SECRETS.intercom, body, 'hex')}` } }),
  ),
  hmacCase(
    'hubspot',
    'contact.creation',
    (id) =>
      JSON.stringify([{ eventId: Number(id.replace(/\D/g, '').slice(0, 9) || '1'), subscriptionType: 'contact.creation', occurredAt: Date.now(), objectId: 7, portalId: 62515 }]),
    async (body, o) => {
      const timestamp = (o.timestamp ?? now()) * 1000;
      const signature = mac('sha256', o.secret ?? SENDER_SECRETS.hubspot, `POST${HUBSPOT_URL}${body}${timestamp}`, 'base64');
      if (!wrong(o) && o.timestamp === undefined) {
        const valid = (await hubspotLib()).Signature.isValid({
          signatureVersion: 'v3',
          signature,
          clientSecret: SENDER_SECRETS.hubspot,
          requestBody: body,
          url: HUBSPOT_URL,
          method: 'POST',
          timestamp,
        });
        if (!valid) throw new Error('@hubspot/api-client rejects');
      }
      return { body, headers: { ...json, 'x-hubspot-signature-v3': signature, 'x-hubspot-request-timestamp': String(timestamp) } };
    },
    (id) => String(Number(id.replace(/\D/g, '').slice(0, 9) || '1')),
    { timestamped: true, batch: true },
  ),
  hmacCase(
    'square',
    'payment.created',
    (id) => JSON.stringify({ merchant_id: 'ML8M1AQ1GQG2K', type: 'payment.created', event_id: id, created_at: new Date().toISOString(), data: { type: 'payment', id: 'p1' } }),
    async (body, o) => {
      const signature = mac('sha256', o.secret ?? SENDER_SECRETS.square, `${SQUARE_URL}${body}`, 'base64');
      if (
        !wrong(o) &&
        !(await (
          await squareLib()
        ).WebhooksHelper.verifySignature({ requestBody: body, signatureHeader: signature, signatureKey: SENDER_SECRETS.square, notificationUrl: SQUARE_URL }))
      ) {
        throw new Error('square WebhooksHelper rejects');
      }
      return { body, headers: { ...json, 'x-square-hmacsha256-signature': signature } };
    },
  ),
  hmacCase(
    'sendgrid',
    'delivered',
    (id) => JSON.stringify([{ email: 'jenny@example.com', timestamp: now(), event: 'delivered', sg_event_id: id, sg_message_id: 'm1' }]),
    async (body, o) => {
      const timestamp = String(o.timestamp ?? now());
      const key = wrong(o) ? keyPair('ec').privateKey : sendgridKeys.privateKey;
      const signature = sign('sha256', Buffer.from(timestamp + body), key).toString('base64');
      if (!wrong(o)) {
        const webhook = new (await sendgridLib()).EventWebhook();
        if (!webhook.verifySignature(webhook.convertPublicKeyToECDSA(SENDGRID_PUBLIC), body, signature, timestamp)) throw new Error('@sendgrid/eventwebhook rejects');
      }
      return { body, headers: { ...json, 'x-twilio-email-event-webhook-signature': signature, 'x-twilio-email-event-webhook-timestamp': timestamp } };
    },
    (id) => id,
    { timestamped: true, tolerance: 600, batch: true },
  ),
  hmacCase(
    'mailgun',
    'delivered',
    (id) => JSON.stringify({ signature: {}, 'event-data': { id, event: 'delivered', timestamp: now(), recipient: 'jenny@example.com' } }),
    async (text, o) => {
      // Mailgun's documented check: hex HMAC-SHA256(signing key, timestamp + token); a new token per POST.
      const timestamp = String(o.timestamp ?? now());
      const token = randomBytes(25).toString('hex');
      const body = JSON.stringify({ ...JSON.parse(text), signature: { timestamp, token, signature: mac('sha256', o.secret ?? SENDER_SECRETS.mailgun, timestamp + token, 'hex') } });
      return { body, headers: json };
    },
    (id) => id,
    { timestamped: true, tolerance: 600, authenticatesBody: false },
  ),
  hmacCase(
    'postmark',
    'Delivery',
    (id) => JSON.stringify({ RecordType: 'Delivery', MessageID: id, Recipient: 'jenny@example.com', DeliveredAt: '2026-12-01T10:00:00Z' }),
    async (body, o) => ({ body, headers: { ...json, authorization: `Basic ${Buffer.from(o.secret ?? SENDER_SECRETS.postmark).toString('base64')}` } }),
    (id) => sha256(JSON.stringify({ RecordType: 'Delivery', MessageID: id, Recipient: 'jenny@example.com', DeliveredAt: '2026-12-01T10:00:00Z' })),
    { rejection: 'bad_credentials', authenticatesBody: false },
  ),
  hmacCase(
    'gitlab',
    'push',
    (id) => JSON.stringify({ object_kind: 'push', event_name: 'push', ref: 'refs/heads/main', after: id, project: { id: 15 } }),
    async (body, o) => ({
      body,
      headers: { ...json, 'x-gitlab-token': o.secret ?? SENDER_SECRETS.gitlab, 'x-gitlab-event': 'Push Hook', 'idempotency-key': o.id, 'x-gitlab-webhook-uuid': randomUUID() },
    }),
    (id) => id,
    { rejection: 'bad_credentials', authenticatesBody: false },
  ),
  hmacCase(
    'bitbucket',
    'repo:push',
    (id) => JSON.stringify({ push: { changes: [{ new: { name: 'main', target: { hash: id } } }] }, repository: { full_name: 'acme/app' } }),
    async (body, o) => ({
      body,
      headers: { ...json, 'x-hub-signature': `sha256=${mac('sha256', o.secret ?? SENDER_SECRETS.bitbucket, body, 'hex')}`, 'x-request-uuid': o.id, 'x-event-key': 'repo:push' },
    }),
  ),
  hmacCase(
    'sentry',
    'issue.created',
    (id) => JSON.stringify({ action: 'created', data: { issue: { id, title: 'TypeError' } }, installation: { uuid: 'i1' } }),
    async (body, o) => ({
      body,
      headers: {
        ...json,
        'sentry-hook-signature': mac('sha256', o.secret ?? SENDER_SECRETS.sentry, body, 'hex'),
        'request-id': o.id,
        'sentry-hook-resource': 'issue',
        'sentry-hook-timestamp': String(now()),
      },
    }),
  ),
  hmacCase(
    'vercel',
    'deployment.succeeded',
    (id) => JSON.stringify({ id, type: 'deployment.succeeded', createdAt: Date.now(), payload: { deployment: { id: 'dpl_1' } } }),
    async (body, o) => ({ body, headers: { ...json, 'x-vercel-signature': mac('sha1', o.secret ?? SENDER_SECRETS.vercel, body, 'hex') } }),
  ),
  hmacCase(
    'typeform',
    'form_response',
    (id) => JSON.stringify({ event_id: id, event_type: 'form_response', form_response: { form_id: 'lT4Z3j' } }),
    async (body, o) => ({ body, headers: { ...json, 'typeform-signature': `sha256=${mac('sha256', o.secret ?? SENDER_SECRETS.typeform, body, 'base64')}` } }),
  ),
  hmacCase(
    'calendly',
    'invitee.created',
    (id) => JSON.stringify({ event: 'invitee.created', created_at: '2026-12-01T10:00:00.000000Z', payload: { uri: `https://api.calendly.com/invitees/${id}` } }),
    async (body, o) => {
      const t = String(o.timestamp ?? now());
      return { body, headers: { ...json, 'calendly-webhook-signature': `t=${t},v1=${mac('sha256', o.secret ?? SENDER_SECRETS.calendly, `${t}.${body}`, 'hex')}` } };
    },
    (id) => sha256(JSON.stringify({ event: 'invitee.created', created_at: '2026-12-01T10:00:00.000000Z', payload: { uri: `https://api.calendly.com/invitees/${id}` } })),
    { timestamped: true, tolerance: 180 },
  ),
  hmacCase(
    'lemonsqueezy',
    'order_created',
    (id) => JSON.stringify({ meta: { event_name: 'order_created' }, data: { type: 'orders', id } }),
    async (body, o) => ({ body, headers: { ...json, 'x-signature': mac('sha256', o.secret ?? SENDER_SECRETS.lemonsqueezy, body, 'hex'), 'x-event-name': 'order_created' } }),
    (id) => sha256(JSON.stringify({ meta: { event_name: 'order_created' }, data: { type: 'orders', id } })),
  ),
  hmacCase(
    'woocommerce',
    'order.created',
    (id) => JSON.stringify({ id: 727, status: 'processing', order_key: id }),
    async (body, o) => ({
      body,
      headers: {
        ...json,
        'x-wc-webhook-signature': mac('sha256', o.secret ?? SENDER_SECRETS.woocommerce, body, 'base64'),
        'x-wc-webhook-delivery-id': o.id,
        'x-wc-webhook-topic': 'order.created',
      },
    }),
  ),
  hmacCase(
    'coinbase-commerce',
    'charge:confirmed',
    (id) => JSON.stringify({ id: 1, event: { id, type: 'charge:confirmed', created_at: new Date().toISOString(), data: { code: 'X' } } }),
    async (body, o) => ({ body, headers: { ...json, 'x-cc-webhook-signature': mac('sha256', o.secret ?? SENDER_SECRETS['coinbase-commerce'], body, 'hex') } }),
  ),
  hmacCase(
    'zoom',
    'meeting.started',
    (id) => JSON.stringify({ event: 'meeting.started', event_ts: 1764583200000, payload: { object: { uuid: id } } }),
    async (body, o) => {
      const t = String(o.timestamp ?? now());
      return { body, headers: { ...json, 'x-zm-request-timestamp': t, 'x-zm-signature': `v0=${mac('sha256', o.secret ?? SENDER_SECRETS.zoom, `v0:${t}:${body}`, 'hex')}` } };
    },
    (id) => sha256(JSON.stringify({ event: 'meeting.started', event_ts: 1764583200000, payload: { object: { uuid: id } } })),
    { timestamped: true },
  ),
  hmacCase(
    'twitch',
    'channel.follow',
    () => JSON.stringify({ subscription: { id: 's1', type: 'channel.follow', version: '2' }, event: { user_id: '1234', broadcaster_user_id: '1337' } }),
    async (body, o) => {
      const timestamp = new Date((o.timestamp ?? now()) * 1000).toISOString();
      const signature = mac('sha256', o.secret ?? SENDER_SECRETS.twitch, o.id + timestamp + body, 'hex');
      return {
        body,
        headers: {
          ...json,
          'twitch-eventsub-message-id': o.id,
          'twitch-eventsub-message-timestamp': timestamp,
          'twitch-eventsub-message-signature': `sha256=${signature}`,
          'twitch-eventsub-message-type': 'notification',
          ...(o.attempt ? { 'twitch-eventsub-message-retry': String(o.attempt) } : {}),
        },
      };
    },
    (id) => id,
    { timestamped: true, tolerance: 600 },
  ),
  hmacCase(
    'meta',
    'messages',
    (id) =>
      JSON.stringify({ object: 'whatsapp_business_account', entry: [{ id, time: 1764583200, changes: [{ field: 'messages', value: { messages: [{ id: `wamid.${id}` }] } }] }] }),
    async (body, o) => ({ body, headers: { ...json, 'x-hub-signature-256': `sha256=${mac('sha256', o.secret ?? SENDER_SECRETS.meta, body, 'hex')}` } }),
    (id) => sha256(JSON.stringify({ id, time: 1764583200, changes: [{ field: 'messages', value: { messages: [{ id: `wamid.${id}` }] } }] })),
    { batch: true },
  ),
  hmacCase(
    'discord',
    'APPLICATION_AUTHORIZED',
    (id) =>
      JSON.stringify({ version: 1, application_id: '1234', type: 1, event: { type: 'APPLICATION_AUTHORIZED', timestamp: '2026-12-01T10:00:00.000Z', data: { user: { id } } } }),
    async (body, o) => {
      const timestamp = String(o.timestamp ?? now());
      const key = wrong(o) ? keyPair('ed25519').privateKey : discordKeys.privateKey;
      const signature = sign(null, Buffer.from(timestamp + body), key).toString('hex');
      if (!wrong(o) && !(await (await discordLib()).verifyKey(body, signature, timestamp, DISCORD_PUBLIC))) throw new Error('discord-interactions rejects');
      return { body, headers: { ...json, 'x-signature-ed25519': signature, 'x-signature-timestamp': timestamp } };
    },
    (id) =>
      sha256(
        JSON.stringify({ version: 1, application_id: '1234', type: 1, event: { type: 'APPLICATION_AUTHORIZED', timestamp: '2026-12-01T10:00:00.000Z', data: { user: { id } } } }),
      ),
    { timestamped: true },
  ),
  hmacCase(
    'paystack',
    'charge.success',
    (id) => JSON.stringify({ event: 'charge.success', data: { reference: id, amount: 50000, status: 'success' } }),
    async (body, o) => ({ body, headers: { ...json, 'x-paystack-signature': mac('sha512', o.secret ?? SENDER_SECRETS.paystack, body, 'hex') } }),
    (id) => sha256(JSON.stringify({ event: 'charge.success', data: { reference: id, amount: 50000, status: 'success' } })),
  ),
  hmacCase(
    'razorpay',
    'payment.captured',
    (id) => JSON.stringify({ entity: 'event', event: 'payment.captured', created_at: now(), payload: { payment: { entity: { id: `pay_${id}` } } } }),
    async (body, o) => ({ body, headers: { ...json, 'x-razorpay-signature': mac('sha256', o.secret ?? SENDER_SECRETS.razorpay, body, 'hex'), 'x-razorpay-event-id': o.id } }),
  ),
  hmacCase(
    'mux',
    'video.asset.ready',
    (id) => JSON.stringify({ type: 'video.asset.ready', id, created_at: new Date().toISOString(), data: { id: 'a1', status: 'ready' } }),
    async (body, o) => {
      const t = String(o.timestamp ?? now());
      return { body, headers: { ...json, 'mux-signature': `t=${t},v1=${mac('sha256', o.secret ?? SENDER_SECRETS.mux, `${t}.${body}`, 'hex')}` } };
    },
    (id) => id,
    { timestamped: true },
  ),
  hmacCase(
    'twilio',
    'message.delivered',
    (id) =>
      new URLSearchParams({
        MessageSid: `SM${id}`,
        AccountSid: 'AC1',
        From: '+15017122661',
        To: '+15558675310',
        MessageStatus: 'delivered',
        Body: 'Your order + receipt',
      }).toString(),
    async (body, o) => {
      // Twilio's documented scheme: base64 HMAC-SHA1 of the URL, then each parameter name + value, sorted.
      const params = Object.fromEntries(new URLSearchParams(body));
      const data =
        TWILIO_URL +
        Object.keys(params)
          .sort()
          .map((key) => key + params[key])
          .join('');
      const signature = mac('sha1', o.secret ?? SENDER_SECRETS.twilio, data, 'base64');
      if (!wrong(o) && !(await twilioLib()).validateRequest(SENDER_SECRETS.twilio, signature, TWILIO_URL, params)) throw new Error('twilio validateRequest rejects');
      return { body, headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature, 'i-twilio-idempotency-token': o.id } };
    },
  ),
];
