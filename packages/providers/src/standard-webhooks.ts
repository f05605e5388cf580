/**
 * Standard Webhooks (https://www.standardwebhooks.com): Svix, Resend, Clerk and every sender
 * following the spec. Headers `webhook-id`, `webhook-timestamp`, `webhook-signature`, or the
 * same with the `svix-` prefix (Svix's own). Signed content: `<id>.<timestamp>.<raw body>`,
 * HMAC-SHA256, base64. The signature header is a space-separated list of `v1,<base64>`
 * entries (one per active secret while rotating).
 *
 * Secrets are `whsec_` + base64 of the key: the prefix is stripped and the rest DECODED
 * (unlike Stripe, whose whole `whsec_` string is the key).
 *
 * Asymmetric (the spec's `v1a`): a configured `whpk_<base64 of a 32-byte ed25519 public key>`
 * verifies `v1a,<base64 signature>` entries over the same `<id>.<timestamp>.<body>`. A source may
 * list both kinds of secret while a sender moves from one to the other; a `v1a` entry is never
 * checked against a `whsec_` secret, nor a `v1` entry against a public key.
 *
 * Stable id: `webhook-id` (`msg_...`); the timestamp and signature change per attempt.
 * Timestamp tolerance: 5 minutes both ways by default, as the spec's reference libraries.
 */
import { createPublicKey, type KeyObject, verify as verifySignature } from 'node:crypto';
import { randomUUID } from 'node:crypto';
import { STANDARD_PAYLOADS } from './signing/adapter-fixtures.js';
import { JSON_CONTENT, bodyText, hmacParts, nowSeconds, objectPayload } from './signing/sign-helpers.js';
import { defineAdapter, secretsVariable, toleranceOption, toleranceVariable, type SignedDelivery, type SignedDeliveryOptions } from './descriptor.js';
import { decodeSignature, digestMatches, hmacSha256 } from './hmac.js';
import {
  checkEventId,
  checkEventType,
  checkTimestamp,
  compactMeta,
  parseJsonObject,
  parseUnixSeconds,
  signedTime,
  type DeliveryRequest,
  type Verified,
  type WebhookSource,
} from './types.js';
import { VerificationError } from '@oncehook/shared';

export interface StandardWebhooksSourceOptions {
  name?: string;
  /** `whsec_<base64>` (or bare base64) secrets. */
  secrets: string[];
  toleranceSeconds?: number;
}

/** Decodes a `whsec_<base64>` secret to the HMAC key; throws (at config time) if it is not one. */
export function decodeStandardWebhooksSecret(secret: string): Buffer {
  const encoded = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded)) throw new Error('a Standard Webhooks secret must be whsec_ followed by base64');
  const key = Buffer.from(encoded, 'base64');
  // The spec: keys are 24 to 64 bytes (Svix and Resend generate 24 or 32).
  if (key.length < 24) throw new Error(`a Standard Webhooks secret must decode to at least 24 bytes (this one decodes to ${key.length})`);
  return key;
}

/** Decodes a `whpk_<base64>` ed25519 public key (the spec's v1a); throws at config time otherwise. */
export function decodeStandardWebhooksPublicKey(secret: string): KeyObject {
  const raw = Buffer.from(secret.slice('whpk_'.length), 'base64');
  if (!/^whpk_[A-Za-z0-9+/]+={0,2}$/.test(secret) || raw.length !== 32)
    throw new Error('a Standard Webhooks public key must be whpk_ followed by the base64 of 32 bytes (ed25519)');
  return createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]), format: 'der', type: 'spki' });
}

function headerSet(header: DeliveryRequest['header']): { prefix: 'webhook' | 'svix'; id: string; timestamp: number; candidates: string[]; asymmetric: string[] } {
  const prefix = header('webhook-id') !== null || header('svix-id') === null ? 'webhook' : 'svix';
  const get = (suffix: string) => {
    const value = header(`${prefix}-${suffix}`);
    if (!value) throw new VerificationError(400, 'missing_header', `missing ${prefix}-${suffix} header`);
    return value;
  };
  const id = get('id');
  const timestamp = parseUnixSeconds(get('timestamp'), `${prefix}-timestamp`);
  const entries = get('signature').split(' ');
  const candidates = entries.filter((entry) => entry.startsWith('v1,')).map((entry) => entry.slice(3));
  const asymmetric = entries.filter((entry) => entry.startsWith('v1a,')).map((entry) => entry.slice(4));
  if (candidates.length === 0 && asymmetric.length === 0) throw new VerificationError(400, 'malformed_header', `${prefix}-signature has no v1,<base64> or v1a,<base64> entry`);
  return { prefix, id, timestamp, candidates, asymmetric };
}

export function createStandardWebhooksSource(options: StandardWebhooksSourceOptions): WebhookSource {
  const name = options.name ?? 'standard-webhooks';
  const tolerance = options.toleranceSeconds ?? 300;
  if (options.secrets.length === 0) throw new Error(`source ${name}: at least one Standard Webhooks secret is required`);
  const publicKeys: KeyObject[] = [];
  const keys: Buffer[] = [];
  for (const secret of options.secrets) {
    try {
      if (secret.startsWith('whpk_')) publicKeys.push(decodeStandardWebhooksPublicKey(secret));
      else keys.push(decodeStandardWebhooksSecret(secret));
    } catch (error) {
      throw new Error(`source ${name}: ${(error as Error).message}`, { cause: error });
    }
  }
  /** The header set, with at least one entry of a kind this source has a key for (else 400). */
  const usableHeaderSet = (header: DeliveryRequest['header']) => {
    const set = headerSet(header);
    if ((keys.length === 0 || set.candidates.length === 0) && (publicKeys.length === 0 || set.asymmetric.length === 0)) {
      const wanted = [keys.length > 0 ? 'v1,<base64>' : null, publicKeys.length > 0 ? 'v1a,<base64> (ed25519)' : null].filter(Boolean).join(' or ');
      throw new VerificationError(400, 'malformed_header', `${set.prefix}-signature has no ${wanted} entry, the kind this source's secrets verify`);
    }
    return set;
  };
  return {
    name,
    kind: 'standard-webhooks',
    precheck(header, now) {
      const { prefix, timestamp } = usableHeaderSet(header);
      checkTimestamp(timestamp, now, tolerance, `${prefix}-timestamp`);
    },
    verify(request: DeliveryRequest): Verified {
      const headers = usableHeaderSet(request.header);
      const { timestamp, candidates, asymmetric } = headers;
      const symmetricValid = keys.some((key) => {
        const expected = hmacSha256(key, `${headers.id}.${timestamp}.`, request.rawBody);
        return candidates.some((candidate) => digestMatches(expected, candidate, 'base64'));
      });
      const signed = () => Buffer.concat([Buffer.from(`${headers.id}.${timestamp}.`), request.rawBody]);
      const asymmetricValid =
        !symmetricValid &&
        publicKeys.length > 0 &&
        asymmetric.some((candidate) => {
          const signature = decodeSignature(candidate, 'base64');
          // mutant: v1a-any-signature
          return signature !== null && signature.length === 64 && publicKeys.some((key) => verifySignature(null, signed(), key, signature));
        });
      if (!symmetricValid && !asymmetricValid)
        throw new VerificationError(401, 'bad_signature', `no ${headers.prefix}-signature v1 or v1a signature matches with any configured secret or public key`);
      checkTimestamp(timestamp, request.now, tolerance, `${headers.prefix}-timestamp`);

      const eventId = checkEventId(headers.id, `${headers.prefix}-id`);
      const { text, json } = parseJsonObject(request.rawBody, 'Standard Webhooks');
      // The spec's payload carries `type`; a sender without one gets the catch-all type.
      const type = json.type === undefined ? 'webhook' : checkEventType(json.type, 'payload "type"');
      return {
        // The header timestamp is the attempt's; the payload's `timestamp` (signed with the
        // body) is the event's own time, which is what stale-update and retention checks need.
        event: {
          source: name,
          kind: 'standard-webhooks',
          eventId,
          type,
          signedAt: signedTime(json.timestamp, 'payload "timestamp"') ?? new Date(timestamp * 1000),
          rawBody: text,
          payload: json,
          meta: compactMeta({ headers: headers.prefix }),
        },
      };
    },
  };
}

/**
 * Signs as a Standard Webhooks sender does: `v1,<base64>` over `<id>.<timestamp>.<body>` with
 * the decoded `whsec_` key; `headers: 'svix'` uses Svix's `svix-` header names.
 */
export function signStandardWebhooksDelivery(payload: unknown, secret: string, options: SignedDeliveryOptions = {}, headers: 'webhook' | 'svix' = 'webhook'): SignedDelivery {
  const timestamp = options.timestamp ?? nowSeconds();
  const object = objectPayload(payload);
  if (options.type && object.type === undefined) object.type = options.type;
  const body = bodyText(payload, object);
  const id = options.id ?? `msg_${randomUUID().replace(/-/g, '')}`;
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return {
    body,
    headers: {
      ...JSON_CONTENT,
      [`${headers}-id`]: id,
      [`${headers}-timestamp`]: String(timestamp),
      [`${headers}-signature`]: `v1,${hmacParts(key, `${id}.${timestamp}.`, body).toString('base64')}`,
    },
    eventId: id,
  };
}

export const STANDARD_WEBHOOKS_ADAPTER = defineAdapter({
  kind: 'standard-webhooks',
  title: 'Standard Webhooks',
  docs: 'https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md',
  env: {
    secrets: secretsVariable(
      'STANDARD_WEBHOOKS_SECRET',
      'Standard Webhooks / Svix secret(s), `whsec_<base64>`. Enables `/webhooks/standard-webhooks`',
      `whsec_${Buffer.from('local-development-standard-key').toString('base64')}`,
    ),
    options: [toleranceVariable('STANDARD_WEBHOOKS_TOLERANCE_SECONDS', 300, "the spec's reference libraries use 5 minutes")],
  },
  redelivery: { days: 4, what: 'Standard Webhooks senders retry for days (the reference schedule spans about 75 hours)' },
  options: { toleranceSeconds: toleranceOption },
  create: createStandardWebhooksSource,
  sign: (payload, secret, options) => signStandardWebhooksDelivery(payload, secret, options),
  payloads: STANDARD_PAYLOADS,
});
