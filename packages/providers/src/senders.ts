/**
 * The built-in senders described as data (scheme.ts says what each field means). Adding a
 * sender is one entry here plus its name in @oncehook/sdk's SENDER_KINDS (the type checker
 * asks for both), its row in docs/providers.md and its case in the harness (providers.ts), whose
 * deliveries are signed by the sender's official library or by its documented example.
 *
 * Each entry was checked against the sender's documentation (`docs`) and, where one exists on
 * npm, its official verifier (test/providers.test.ts signs with it). The `dev` secrets are
 * public development values used only by `oncehook dev` / `oncehook send`.
 */
import { createHmac } from 'node:crypto';
import type { SenderKind } from '@oncehook/sdk';
import { secretsEqual } from './hmac.js';
import type { SenderScheme } from './scheme.js';

const DAY = (days: number, what: string) => ({ days, what });

/** Every table sender, by kind. */
export const SENDER_SCHEMES: Readonly<Record<SenderKind, SenderScheme>> = {
  linear: {
    kind: 'linear',
    title: 'Linear',
    env: 'LINEAR_WEBHOOK_SECRET',
    secretName: 'webhook signing secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'Linear-Signature', encoding: 'hex', signed: ['body'] },
    // Linear puts the send time in the signed body (`webhookTimestamp`, ms) and asks for 60 s.
    timestamp: { from: { field: 'webhookTimestamp' }, unit: 'ms', toleranceSeconds: 60 },
    id: { header: 'Linear-Delivery' },
    type: { field: ['type', 'action'] },
    signedAt: { field: 'createdAt', unit: 'iso' },
    redelivery: DAY(1, 'Linear retries 3 times, the last 6 hours after the first attempt'),
    dev: 'local-development-linear-secret',
    docs: 'https://linear.app/developers/webhooks',
  },
  intercom: {
    kind: 'intercom',
    title: 'Intercom',
    env: 'INTERCOM_CLIENT_SECRET',
    secretName: 'client secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha1', header: 'X-Hub-Signature', encoding: 'hex', prefix: 'sha1=', signed: ['body'] },
    id: { field: 'id' },
    type: { field: 'topic' },
    signedAt: { field: 'created_at', unit: 's' },
    redelivery: DAY(1, 'Intercom retries a failed notification once, a minute later'),
    dev: 'local-development-intercom-secret',
    docs: 'https://developers.intercom.com/docs/webhooks/setting-up-webhooks',
  },
  hubspot: {
    kind: 'hubspot',
    title: 'HubSpot',
    env: 'HUBSPOT_CLIENT_SECRET',
    secretName: 'app client secret',
    key: 'text',
    // v3: base64 HMAC-SHA256 of method + URL + body + timestamp; older than 5 minutes is refused.
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-HubSpot-Signature-v3', encoding: 'base64', signed: ['method', 'url', 'body', 'timestamp'] },
    timestamp: { from: { header: 'X-HubSpot-Request-Timestamp' }, unit: 'ms', toleranceSeconds: 300 },
    // Up to 100 events per request, each with its own eventId.
    batch: { items: '$', id: { field: 'eventId' }, type: { field: 'subscriptionType' }, signedAt: { field: 'occurredAt', unit: 'ms' } },
    redelivery: DAY(1, 'HubSpot retries up to 10 times over the next 24 hours'),
    dev: 'local-development-hubspot-secret',
    docs: 'https://developers.hubspot.com/docs/api/webhooks/validating-requests',
  },
  square: {
    kind: 'square',
    title: 'Square',
    env: 'SQUARE_SIGNATURE_KEY',
    secretName: 'signature key',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'x-square-hmacsha256-signature', encoding: 'base64', signed: ['url', 'body'] },
    id: { field: 'event_id' },
    type: { field: 'type' },
    signedAt: { field: 'created_at', unit: 'iso' },
    redelivery: DAY(1, 'Square retries for up to 24 hours'),
    dev: 'local-development-square-key',
    docs: 'https://developer.squareup.com/docs/webhooks/step3validate',
  },
  sendgrid: {
    kind: 'sendgrid',
    title: 'SendGrid',
    env: 'SENDGRID_VERIFICATION_KEY',
    secretName: 'verification key',
    key: 'ecdsa-spki-base64',
    // ECDSA P-256 over timestamp + body, with the public key the Event Webhook settings show.
    signature: { family: 'ecdsa-p256', header: 'X-Twilio-Email-Event-Webhook-Signature', encoding: 'base64', signed: ['timestamp', 'body'] },
    timestamp: { from: { header: 'X-Twilio-Email-Event-Webhook-Timestamp' }, unit: 's', toleranceSeconds: 600 },
    // sg_event_id is SendGrid's documented dedupe id, but it is reported to change on retries:
    // the element's content without it is a second key (a retried element is a duplicate either way).
    batch: { items: '$', id: { field: 'sg_event_id' }, type: { field: 'event' }, signedAt: { field: 'timestamp', unit: 's' }, contentKeyWithout: ['sg_event_id'] },
    redelivery: DAY(1, 'SendGrid retries for up to 24 hours'),
    dev: {
      public: 'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEPshtag7SiBlPoOIqHtkJyrp7lTTkA8kxj8DUcdSQOpeBP/2htkx/evj059m2LQDadhGGv8JpmkrnLp6cwUF81w==',
      private:
        'MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgTOYGBV5bE2o0UH5m4pDJkxBn7fwSCUB1V8sYS02/MSqhRANCAAQ+yG1qDtKIGU+g4ioe2QnKunuVNOQDyTGPwNRx1JA6l4E//aG2TH96+PTn2bYtANp2EYa/wmmaSucunpzBQXzX',
    },
    docs: 'https://www.twilio.com/docs/sendgrid/for-developers/tracking-events/getting-started-event-webhook-security-features',
  },
  mailgun: {
    kind: 'mailgun',
    title: 'Mailgun',
    env: 'MAILGUN_WEBHOOK_SIGNING_KEY',
    secretName: 'webhook signing key',
    key: 'text',
    // The signature is IN the body and covers only timestamp + token, not the event: the
    // token is the replay key (a captured signature cannot carry a second body).
    signature: {
      family: 'hmac-in-body',
      algorithm: 'sha256',
      encoding: 'hex',
      object: 'signature',
      signedFields: ['timestamp', 'token'],
      signatureField: 'signature',
      timestampField: 'timestamp',
    },
    timestamp: { from: { field: 'signature.timestamp' }, unit: 's', toleranceSeconds: 600 },
    id: { field: 'event-data.id' },
    type: { field: 'event-data.event' },
    signedAt: { field: 'event-data.timestamp', unit: 's' },
    replayKey: 'signature.token',
    redelivery: DAY(1, 'Mailgun retries for 8 hours'),
    dev: 'local-development-mailgun-key',
    docs: 'https://documentation.mailgun.com/docs/mailgun/user-manual/webhooks/securing-webhooks',
  },
  postmark: {
    kind: 'postmark',
    title: 'Postmark',
    env: 'POSTMARK_WEBHOOK_CREDENTIALS',
    secretName: 'Basic auth credentials',
    key: 'text',
    // Postmark signs nothing: Basic credentials in the webhook URL are all it offers.
    signature: { family: 'basic' },
    id: { bodyHash: true },
    type: { field: 'RecordType' },
    redelivery: DAY(1, 'Postmark retries failed webhooks up to 10 times over about 6 hours'),
    dev: 'oncehook:local-development-postmark',
    docs: 'https://postmarkapp.com/developer/webhooks/webhooks-overview',
  },
  gitlab: {
    kind: 'gitlab',
    title: 'GitLab',
    env: 'GITLAB_WEBHOOK_TOKEN',
    secretName: 'secret token',
    key: 'text',
    signature: { family: 'token', header: 'X-Gitlab-Token' },
    // Idempotency-Key: the same on automatic and manual retries of one delivery (GitLab 17.4+).
    id: { header: 'Idempotency-Key' },
    type: { field: 'object_kind' },
    redelivery: DAY(2, 'GitLab can resend a delivery from the webhook request history of the last 2 days'),
    dev: 'local-development-gitlab-token',
    docs: 'https://docs.gitlab.com/user/project/integrations/webhooks/',
  },
  bitbucket: {
    kind: 'bitbucket',
    title: 'Bitbucket',
    env: 'BITBUCKET_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-Hub-Signature', encoding: 'hex', prefix: 'sha256=', signed: ['body'] },
    id: { header: 'X-Request-UUID' },
    type: { header: 'X-Event-Key' },
    redelivery: DAY(1, 'Bitbucket retries a failed delivery twice more'),
    dev: 'local-development-bitbucket-secret',
    docs: 'https://support.atlassian.com/bitbucket-cloud/docs/manage-webhooks/',
  },
  sentry: {
    kind: 'sentry',
    title: 'Sentry',
    env: 'SENTRY_CLIENT_SECRET',
    secretName: 'integration client secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'Sentry-Hook-Signature', encoding: 'hex', signed: ['body'] },
    id: { header: 'Request-ID' },
    type: { join: [{ header: 'Sentry-Hook-Resource' }, { field: 'action' }] },
    redelivery: null,
    dev: 'local-development-sentry-secret',
    docs: 'https://docs.sentry.io/organization/integrations/integration-platform/webhooks/',
  },
  vercel: {
    kind: 'vercel',
    title: 'Vercel',
    env: 'VERCEL_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha1', header: 'x-vercel-signature', encoding: 'hex', signed: ['body'] },
    id: { field: 'id' },
    type: { field: 'type' },
    signedAt: { field: 'createdAt', unit: 'ms' },
    redelivery: null,
    dev: 'local-development-vercel-secret',
    docs: 'https://vercel.com/docs/webhooks/webhooks-api',
  },
  typeform: {
    kind: 'typeform',
    title: 'Typeform',
    env: 'TYPEFORM_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'Typeform-Signature', encoding: 'base64', prefix: 'sha256=', signed: ['body'] },
    id: { field: 'event_id' },
    type: { field: 'event_type' },
    redelivery: DAY(1, 'Typeform retries for up to 10 hours'),
    dev: 'local-development-typeform-secret',
    docs: 'https://www.typeform.com/developers/webhooks/secure-your-webhooks/',
  },
  calendly: {
    kind: 'calendly',
    title: 'Calendly',
    env: 'CALENDLY_WEBHOOK_SIGNING_KEY',
    secretName: 'webhook signing key',
    key: 'text',
    signature: {
      family: 'hmac',
      algorithm: 'sha256',
      header: 'Calendly-Webhook-Signature',
      encoding: 'hex',
      list: { separator: ',', timestampKey: 't', signatureKey: 'v1' },
      signed: ['timestamp', { literal: '.' }, 'body'],
    },
    timestamp: { from: { list: true }, unit: 's', toleranceSeconds: 180 },
    id: { bodyHash: true },
    type: { field: 'event' },
    signedAt: { field: 'created_at', unit: 'iso' },
    redelivery: DAY(1, 'Calendly retries with backoff for up to 24 hours'),
    dev: 'local-development-calendly-key',
    docs: 'https://developer.calendly.com/api-docs/4c305798a61d3-webhook-signatures',
  },
  lemonsqueezy: {
    kind: 'lemonsqueezy',
    title: 'Lemon Squeezy',
    env: 'LEMONSQUEEZY_WEBHOOK_SECRET',
    secretName: 'signing secret',
    key: 'text',
    minSecretLength: 6,
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-Signature', encoding: 'hex', signed: ['body'] },
    id: { bodyHash: true },
    type: { field: 'meta.event_name' },
    redelivery: DAY(1, 'Lemon Squeezy retries 3 times with exponential backoff'),
    dev: 'local-development-lemonsqueezy-secret',
    docs: 'https://docs.lemonsqueezy.com/help/webhooks/signing-requests',
  },
  woocommerce: {
    kind: 'woocommerce',
    title: 'WooCommerce',
    env: 'WOOCOMMERCE_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    minSecretLength: 8,
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-WC-Webhook-Signature', encoding: 'base64', signed: ['body'] },
    id: { header: 'X-WC-Webhook-Delivery-ID' },
    type: { header: 'X-WC-Webhook-Topic' },
    redelivery: null,
    dev: 'local-development-woocommerce-secret',
    docs: 'https://woocommerce.github.io/woocommerce-rest-api-docs/#webhooks',
  },
  'coinbase-commerce': {
    kind: 'coinbase-commerce',
    title: 'Coinbase Commerce',
    env: 'COINBASE_COMMERCE_WEBHOOK_SECRET',
    secretName: 'shared secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-CC-Webhook-Signature', encoding: 'hex', signed: ['body'] },
    id: { field: 'event.id' },
    type: { field: 'event.type' },
    signedAt: { field: 'event.created_at', unit: 'iso' },
    redelivery: DAY(3, 'Coinbase Commerce retries for up to 3 days'),
    dev: 'local-development-coinbase-secret',
    docs: 'https://docs.cdp.coinbase.com/commerce-onchain/docs/webhooks-security',
  },
  zoom: {
    kind: 'zoom',
    title: 'Zoom',
    env: 'ZOOM_WEBHOOK_SECRET_TOKEN',
    secretName: 'secret token',
    key: 'text',
    signature: {
      family: 'hmac',
      algorithm: 'sha256',
      header: 'x-zm-signature',
      encoding: 'hex',
      prefix: 'v0=',
      signed: [{ literal: 'v0:' }, 'timestamp', { literal: ':' }, 'body'],
    },
    timestamp: { from: { header: 'x-zm-request-timestamp' }, unit: 's', toleranceSeconds: 300 },
    id: { bodyHash: true },
    type: { field: 'event' },
    signedAt: { field: 'event_ts', unit: 'ms' },
    // Validation: answer {plainToken, encryptedToken = hex HMAC-SHA256(secret, plainToken)}.
    handshake: ({ json, secret }) => {
      const record = json as { event?: unknown; payload?: { plainToken?: unknown } };
      if (record.event !== 'endpoint.url_validation') return null;
      const plainToken = record.payload?.plainToken;
      if (typeof plainToken !== 'string' || plainToken === '')
        return { body: { error: 'endpoint.url_validation has no payload.plainToken' }, status: 400, note: 'Zoom validation without a plainToken' };
      return { body: { plainToken, encryptedToken: createHmac('sha256', secret).update(plainToken).digest('hex') }, note: 'Zoom endpoint.url_validation answered' };
    },
    redelivery: DAY(1, 'Zoom retries 3 times, the last 90 minutes after the first'),
    dev: 'local-development-zoom-token',
    docs: 'https://developers.zoom.us/docs/api/webhooks/',
  },
  twitch: {
    kind: 'twitch',
    title: 'Twitch EventSub',
    env: 'TWITCH_EVENTSUB_SECRET',
    secretName: 'subscription secret',
    key: 'text',
    minSecretLength: 10,
    signature: {
      family: 'hmac',
      algorithm: 'sha256',
      header: 'Twitch-Eventsub-Message-Signature',
      encoding: 'hex',
      prefix: 'sha256=',
      signed: [{ header: 'Twitch-Eventsub-Message-Id' }, { header: 'Twitch-Eventsub-Message-Timestamp' }, 'body'],
    },
    timestamp: { from: { header: 'Twitch-Eventsub-Message-Timestamp' }, unit: 'iso', toleranceSeconds: 600 },
    id: { header: 'Twitch-Eventsub-Message-Id' },
    type: { field: 'subscription.type' },
    signedAt: { field: 'event.started_at', unit: 'iso' },
    handshake: ({ json, header }) => {
      const type = header('Twitch-Eventsub-Message-Type');
      if (type === 'webhook_callback_verification') {
        const challenge = (json as { challenge?: unknown }).challenge;
        if (typeof challenge !== 'string')
          return { body: { error: 'webhook_callback_verification has no challenge' }, status: 400, note: 'Twitch verification without a challenge' };
        return { body: challenge, note: 'Twitch webhook_callback_verification answered' };
      }
      if (type === 'revocation') return { body: null, note: 'Twitch revocation acknowledged, not stored' };
      return null;
    },
    redelivery: DAY(1, 'Twitch retries a notification with the same message id for a short while, then revokes'),
    dev: 'local-development-twitch-secret',
    docs: 'https://dev.twitch.tv/docs/eventsub/handling-webhook-events/',
  },
  meta: {
    kind: 'meta',
    title: 'Meta (WhatsApp, Messenger, Instagram)',
    env: 'META_APP_SECRET',
    secretName: 'app secret',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-Hub-Signature-256', encoding: 'hex', prefix: 'sha256=', signed: ['body'] },
    // Batched: several `entry` elements per delivery, none with an id: each is keyed by its hash.
    batch: { items: 'entry', id: { bodyHash: true }, type: { field: 'changes.0.field', default: 'messaging' }, signedAt: { field: 'time', unit: 's' } },
    get: (query, options) => {
      if (query.get('hub.mode') !== 'subscribe') return { body: { error: 'hub.mode must be subscribe' }, status: 400, note: 'Meta GET without hub.mode=subscribe' };
      const challenge = query.get('hub.challenge') ?? '';
      // mutant: meta-verify-token-unchecked
      if (!options.verifyToken || !secretsEqual(options.verifyToken, query.get('hub.verify_token') ?? '')) {
        return { body: { error: 'hub.verify_token is not the configured verify token' }, status: 403, note: 'Meta subscription check with a wrong verify token refused' };
      }
      return { body: challenge, note: 'Meta subscription check answered' };
    },
    redelivery: DAY(7, 'Meta retries failed deliveries for up to 7 days (WhatsApp Cloud API)'),
    dev: 'local-development-meta-app-secret',
    docs: 'https://developers.facebook.com/docs/graph-api/webhooks/getting-started',
  },
  discord: {
    kind: 'discord',
    title: 'Discord (webhook events)',
    env: 'DISCORD_PUBLIC_KEY',
    secretName: 'application public key',
    key: 'ed25519-hex',
    signature: { family: 'ed25519', header: 'X-Signature-Ed25519', encoding: 'hex', signed: ['timestamp', 'body'] },
    timestamp: { from: { header: 'X-Signature-Timestamp' }, unit: 's', toleranceSeconds: 300 },
    id: { bodyHash: true },
    type: { field: 'event.type' },
    signedAt: { field: 'event.timestamp', unit: 'iso' },
    // PING (type 0) when the URL is saved: 204, nothing stored.
    handshake: ({ json }) => ((json as { type?: unknown }).type === 0 ? { body: null, note: 'Discord PING acknowledged' } : null),
    redelivery: null,
    dev: { public: '644c1f345495393ae263067340f72b8f69f766d465863cd2649353046cbe7bf1', private: 'MC4CAQAwBQYDK2VwBCIEIFxMu9OttBjt2KUDksc1J2Uo8ZEm5lRHm0yfSyuJhCeo' },
    docs: 'https://discord.com/developers/docs/events/webhook-events',
  },
  paystack: {
    kind: 'paystack',
    title: 'Paystack',
    env: 'PAYSTACK_SECRET_KEY',
    secretName: 'secret key',
    key: 'text',
    signature: { family: 'hmac', algorithm: 'sha512', header: 'x-paystack-signature', encoding: 'hex', signed: ['body'] },
    id: { bodyHash: true },
    type: { field: 'event' },
    redelivery: DAY(3, 'Paystack retries every 3 minutes at first, then hourly for 72 hours'),
    dev: 'sk_test_local_development_paystack',
    docs: 'https://paystack.com/docs/payments/webhooks/',
  },
  razorpay: {
    kind: 'razorpay',
    title: 'Razorpay',
    env: 'RAZORPAY_WEBHOOK_SECRET',
    secretName: 'webhook secret',
    key: 'text',
    minSecretLength: 8,
    signature: { family: 'hmac', algorithm: 'sha256', header: 'X-Razorpay-Signature', encoding: 'hex', signed: ['body'] },
    id: { header: 'x-razorpay-event-id' },
    type: { field: 'event' },
    signedAt: { field: 'created_at', unit: 's' },
    redelivery: DAY(1, 'Razorpay retries for 24 hours'),
    dev: 'local-development-razorpay-secret',
    docs: 'https://razorpay.com/docs/webhooks/validate-test/',
  },
  mux: {
    kind: 'mux',
    title: 'Mux',
    env: 'MUX_WEBHOOK_SECRET',
    secretName: 'signing secret',
    key: 'text',
    signature: {
      family: 'hmac',
      algorithm: 'sha256',
      header: 'Mux-Signature',
      encoding: 'hex',
      list: { separator: ',', timestampKey: 't', signatureKey: 'v1' },
      signed: ['timestamp', { literal: '.' }, 'body'],
    },
    timestamp: { from: { list: true }, unit: 's', toleranceSeconds: 300 },
    id: { field: 'id' },
    type: { field: 'type' },
    signedAt: { field: 'created_at', unit: 'iso' },
    redelivery: DAY(1, 'Mux retries for up to 24 hours'),
    dev: 'local-development-mux-secret',
    docs: 'https://docs.mux.com/core/verify-webhook-signatures',
  },
  twilio: {
    kind: 'twilio',
    title: 'Twilio',
    env: 'TWILIO_AUTH_TOKEN',
    secretName: 'auth token',
    key: 'text',
    // Form-encoded webhooks (Messaging, Voice): base64 HMAC-SHA1 of the URL Twilio posts to, then
    // every parameter name followed by its value, sorted by name.
    body: 'form',
    signature: { family: 'hmac', algorithm: 'sha1', header: 'X-Twilio-Signature', encoding: 'base64', signed: ['url', 'form-params-sorted'] },
    // The same on Twilio's retries of one webhook; not signed, so the body is a second key.
    id: { header: 'I-Twilio-Idempotency-Token' },
    type: {
      firstOf: [
        { field: 'MessageStatus', prefix: 'message.' },
        { field: 'SmsStatus', prefix: 'message.' },
        { field: 'CallStatus', prefix: 'call.' },
      ],
      default: 'request',
    },
    redelivery: null,
    dev: 'local-development-twilio-auth-token',
    docs: 'https://www.twilio.com/docs/usage/webhooks/webhooks-security',
  },
};

export const SENDER_KIND_LIST = Object.keys(SENDER_SCHEMES) as SenderKind[];

export function isSenderKind(kind: string): kind is SenderKind {
  return Object.hasOwn(SENDER_SCHEMES, kind);
}
