/**
 * Slack Events API: `X-Slack-Signature: v0=<hex>` = HMAC-SHA256 of
 * `v0:<X-Slack-Request-Timestamp>:<raw body>` with the app's signing secret; timestamp
 * tolerance 5 minutes both ways.
 *
 * - `url_verification`: answered with `{"challenge": ...}` only AFTER the signature is
 *   verified; nothing is stored.
 * - `event_callback`: stable id `event_id` (`Ev...`); type = the inner `event.type`.
 *   `X-Slack-Retry-Num` / `X-Slack-Retry-Reason` and the timestamp change per attempt and are
 *   never part of the key.
 * - `app_rate_limited` and other envelope types without an event: acknowledged, not stored.
 */
import { randomUUID } from 'node:crypto';
import { SLACK_PAYLOADS } from './signing/adapter-fixtures.js';
import { JSON_CONTENT, bodyId, bodyText, hmacParts, nowSeconds, objectPayload } from './signing/sign-helpers.js';
import { defineAdapter, secretsVariable, toleranceOption, toleranceVariable, type SignedDelivery, type SignedDeliveryOptions } from './descriptor.js';
import { hmacSha256, signaturesEqual } from './hmac.js';
import {
  checkEventId,
  checkSecrets,
  checkEventType,
  checkTimestamp,
  compactMeta,
  isRecord,
  parseJsonObject,
  parseUnixSeconds,
  requireHeader,
  signedTime,
  type DeliveryRequest,
  type Verified,
  type WebhookSource,
} from './types.js';
import { VerificationError } from '@oncehook/shared';

export interface SlackSourceOptions {
  name?: string;
  secrets: string[];
  toleranceSeconds?: number;
}

export function createSlackSource(options: SlackSourceOptions): WebhookSource {
  const name = options.name ?? 'slack';
  const tolerance = options.toleranceSeconds ?? 300;
  checkSecrets(name, 'Slack signing', options.secrets);
  const parseHeaders = (header: DeliveryRequest['header']) => {
    const signature = requireHeader({ header }, 'X-Slack-Signature');
    const timestamp = parseUnixSeconds(requireHeader({ header }, 'X-Slack-Request-Timestamp'), 'X-Slack-Request-Timestamp');
    if (!/^v0=[0-9a-f]{64}$/.test(signature)) throw new VerificationError(400, 'malformed_header', 'X-Slack-Signature must be v0=<64 lowercase hex digits>');
    return { signature, timestamp };
  };
  return {
    name,
    kind: 'slack',
    precheck(header, now) {
      checkTimestamp(parseHeaders(header).timestamp, now, tolerance, 'X-Slack-Request-Timestamp');
    },
    verify(request: DeliveryRequest): Verified {
      const { signature, timestamp } = parseHeaders(request.header);
      const valid = options.secrets.some((secret) => signaturesEqual(`v0=${hmacSha256(secret, `v0:${timestamp}:`, request.rawBody).toString('hex')}`, signature));
      if (!valid) throw new VerificationError(401, 'bad_signature', 'X-Slack-Signature does not match the body with any configured signing secret');
      checkTimestamp(timestamp, request.now, tolerance, 'X-Slack-Request-Timestamp');

      // Slash commands and interactivity are form-encoded: verified, then refused (docs/providers.md).
      if ((request.header('Content-Type') ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) {
        throw new VerificationError(
          400,
          'malformed_payload',
          'this is a Slack slash command or interactivity payload; Oncehook takes the Events API only (point slash commands and interactivity at your app)',
        );
      }
      const { text, json } = parseJsonObject(request.rawBody, 'Slack Events API');
      if (json.type === 'url_verification') {
        if (typeof json.challenge !== 'string') throw new VerificationError(400, 'malformed_payload', 'url_verification needs a "challenge" string');
        return { reply: { body: { challenge: json.challenge }, note: 'url_verification challenge answered' } };
      }
      if (json.type !== 'event_callback') {
        return { reply: { body: { ok: true }, note: `Slack ${String(json.type)} notice acknowledged, not stored` } };
      }
      const eventId = checkEventId(json.event_id, 'Slack "event_id"');
      const inner = isRecord(json.event) ? json.event : {};
      const type = checkEventType(inner.type ?? 'event_callback', 'Slack "event.type"');
      return {
        event: {
          source: name,
          kind: 'slack',
          eventId,
          type,
          signedAt: signedTime(json.event_time, 'Slack "event_time"'),
          rawBody: text,
          payload: json,
          meta: compactMeta({ teamId: typeof json.team_id === 'string' ? json.team_id : null, apiAppId: typeof json.api_app_id === 'string' ? json.api_app_id : null }),
        },
      };
    },
  };
}

/**
 * Signs as Slack does: `v0=<hex>` over `v0:<timestamp>:<body>`; a payload that is not an
 * envelope is wrapped in an `event_callback` one; `attempt` > 0 adds Slack's retry headers.
 */
export function signSlackDelivery(payload: unknown, secret: string, options: SignedDeliveryOptions = {}): SignedDelivery {
  const timestamp = options.timestamp ?? nowSeconds();
  const object = objectPayload(payload);
  const freshId = () => `Ev${randomUUID().replace(/-/g, '').slice(0, 10).toUpperCase()}`;
  const envelope =
    object.type === 'event_callback' || object.type === 'url_verification'
      ? object
      : { type: 'event_callback', event_id: options.id ?? freshId(), event_time: timestamp, event: { type: options.type ?? 'message', ...object } };
  if (envelope === object) bodyId(envelope, 'event_id', payload, options.id, freshId);
  const body = bodyText(payload, envelope);
  const retry: Record<string, string> = options.attempt && options.attempt > 0 ? { 'x-slack-retry-num': String(options.attempt), 'x-slack-retry-reason': 'http_timeout' } : {};
  return {
    body,
    headers: {
      ...JSON_CONTENT,
      'x-slack-request-timestamp': String(timestamp),
      'x-slack-signature': `v0=${hmacParts(secret, `v0:${timestamp}:`, body).toString('hex')}`,
      ...retry,
    },
    eventId: String(envelope.event_id ?? ''),
  };
}

export const SLACK_ADAPTER = defineAdapter({
  kind: 'slack',
  title: 'Slack',
  docs: 'https://api.slack.com/authentication/verifying-requests-from-slack',
  env: {
    secrets: secretsVariable('SLACK_SIGNING_SECRET', 'Slack signing secret(s). Enables `/webhooks/slack`', 'local-development-slack-secret'),
    options: [toleranceVariable('SLACK_TOLERANCE_SECONDS', 300, "Slack's documentation asks for 5 minutes")],
  },
  redelivery: { days: 1, what: 'Slack retries 3 times within 5 minutes' },
  options: { toleranceSeconds: toleranceOption },
  create: createSlackSource,
  sign: signSlackDelivery,
  payloads: SLACK_PAYLOADS,
});
