/**
 * Generic HMAC-SHA256, for in-house senders: one header carries the signature, hex (either
 * case) or base64, with an optional prefix such as `sha256=`; it is compared as bytes. Where the stable id and the type come from is
 * configured: a header, or a field of the JSON body (dot path).
 *
 * Signed content: `[<timestamp>.]` `[<value of each signedHeaders header>.]...` `<raw body>`:
 * the timestamp when `timestampHeader` is set, then the values of the headers listed in
 * `signedHeaders`, in order, each followed by a dot.
 *
 * An id or a type taken from a header the signature does not cover is refused at start: anyone
 * holding one captured delivery could replay it under the id of the NEXT real event (which
 * would then be dropped as a duplicate) or under another type. Either list the header in
 * `signedHeaders` (if the sender signs it) or set `bodyDedupe: true` (a replayed body is then a
 * duplicate whatever id it carries, and a type from a header is still refused).
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { VerificationError } from '@oncehook/shared';
import { JSON_CONTENT, bodyText, hmacParts, nowSeconds } from './signing/sign-helpers.js';
import { defineAdapter, toleranceOption, type SignedDelivery, type SignedDeliveryOptions } from './descriptor.js';
import { type DigestEncoding, digestMatches, hmacSha256 } from './hmac.js';
import {
  bodyHash,
  checkEventId,
  checkEventType,
  checkSecrets,
  checkTimestamp,
  parseJsonObject,
  parseUnixSeconds,
  requireHeader,
  type DeliveryRequest,
  type Verified,
  type WebhookSource,
} from './types.js';

export type ValueLocation = { header: string } | { field: string };

export interface GenericHmacSourceOptions {
  name: string;
  secrets: string[];
  signatureHeader: string;
  encoding: DigestEncoding;
  /** Text before the signature in the header, e.g. `sha256=`. */
  signaturePrefix?: string;
  /** When set, the signed content starts with `<timestamp>.` and the timestamp is checked. */
  timestampHeader?: string;
  toleranceSeconds?: number;
  /** Headers whose values are part of the signed content (after the timestamp), in this order. */
  signedHeaders?: string[];
  /** Deduplicate on sha256 of the body too (for an id the signature does not cover). */
  bodyDedupe?: boolean;
  /** Where the stable event id is. */
  id: ValueLocation;
  /** Where the event type is; a fixed type when absent. */
  type?: ValueLocation | { value: string };
}

function fieldAt(json: unknown, path: string): unknown {
  let current: unknown = json;
  for (const key of path.split('.')) {
    if (typeof current !== 'object' || current === null || Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

export function createGenericHmacSource(options: GenericHmacSourceOptions): WebhookSource {
  const { name } = options;
  const tolerance = options.toleranceSeconds ?? 300;
  const prefix = options.signaturePrefix ?? '';
  const signedHeaders = options.signedHeaders ?? [];
  const signed = (header: string) => signedHeaders.some((h) => h.toLowerCase() === header.toLowerCase());
  checkSecrets(name, 'HMAC', options.secrets);
  // mutant: unsigned-header-id-accepted
  if ('header' in options.id && !signed(options.id.header) && !options.bodyDedupe) {
    throw new Error(
      `source ${name}: the event id comes from header ${options.id.header}, which the signature does not cover: a captured delivery replayed under the id of the next real event would drop that event as a duplicate. List ${options.id.header} in signedHeaders (if the sender signs it), or set bodyDedupe: true`,
    );
  }
  if (options.type && 'header' in options.type && !signed(options.type.header)) {
    throw new Error(
      `source ${name}: the event type comes from header ${options.type.header}, which the signature does not cover: a captured delivery could be replayed as another type. List ${options.type.header} in signedHeaders, or take the type from a body field`,
    );
  }

  const parseHeaders = (header: DeliveryRequest['header']) => {
    const value = requireHeader({ header }, options.signatureHeader);
    if (!value.startsWith(prefix)) throw new VerificationError(400, 'malformed_header', `${options.signatureHeader} must start with "${prefix}"`);
    return {
      received: value.slice(prefix.length),
      timestamp: options.timestampHeader ? parseUnixSeconds(requireHeader({ header }, options.timestampHeader), options.timestampHeader) : null,
      signedValues: signedHeaders.map((h) => requireHeader({ header }, h)),
      idFromHeader: 'header' in options.id ? requireHeader({ header }, options.id.header) : null,
    };
  };

  return {
    name,
    kind: 'hmac',
    precheck(header, now) {
      const { timestamp } = parseHeaders(header);
      if (timestamp !== null) checkTimestamp(timestamp, now, tolerance, options.timestampHeader ?? 'timestamp');
    },
    verify(request: DeliveryRequest): Verified {
      const { received, timestamp, signedValues, idFromHeader } = parseHeaders(request.header);
      const parts = [...(timestamp === null ? [] : [`${timestamp}.`]), ...signedValues.map((v) => `${v}.`), request.rawBody];
      const valid = options.secrets.some((secret) => digestMatches(hmacSha256(secret, ...parts), received, options.encoding));
      if (!valid) throw new VerificationError(401, 'bad_signature', `${options.signatureHeader} does not match the body with any configured secret`);
      if (timestamp !== null) checkTimestamp(timestamp, request.now, tolerance, options.timestampHeader ?? 'timestamp');

      // A JSON object, like every other kind's payload: `[1,2]`, `null` or `42` is no event.
      // mutant: hmac-accepts-non-objects
      const { text, json } = parseJsonObject(request.rawBody, `${name} (hmac source)`);
      const idWhere = 'header' in options.id ? options.id.header : `body field "${options.id.field}"`;
      const eventId = checkEventId(idFromHeader ?? fieldAt(json, (options.id as { field: string }).field), idWhere);
      const typeSpec = options.type ?? { value: 'webhook' };
      const rawType = 'value' in typeSpec ? typeSpec.value : 'header' in typeSpec ? request.header(typeSpec.header) : fieldAt(json, typeSpec.field);
      const type = checkEventType(rawType, 'header' in typeSpec ? typeSpec.header : 'field' in typeSpec ? `body field "${typeSpec.field}"` : 'type');
      return {
        event: {
          source: name,
          kind: 'hmac',
          eventId,
          type,
          signedAt: timestamp === null ? null : new Date(timestamp * 1000),
          rawBody: text,
          payload: json,
          meta: {},
          bodyHash: options.bodyDedupe ? bodyHash(request.rawBody) : null,
        },
      };
    },
  };
}

/** Signs as a generic HMAC source configured as `options.hmac` verifies (docs/providers.md). */
export function signGenericHmacDelivery(payload: unknown, secret: string, options: SignedDeliveryOptions = {}): SignedDelivery {
  const config = options.hmac;
  if (!config) throw new Error("signedDelivery('hmac', ...) needs options.hmac: the source's signatureHeader, encoding, signaturePrefix and timestampHeader");
  const timestamp = options.timestamp ?? nowSeconds();
  const body = bodyText(payload);
  const headers: Record<string, string> = { ...JSON_CONTENT };
  if (config.timestampHeader) headers[config.timestampHeader.toLowerCase()] = String(timestamp);
  const id = options.id ?? randomUUID();
  if (config.idHeader) headers[config.idHeader.toLowerCase()] = id;
  if (config.typeHeader && options.type) headers[config.typeHeader.toLowerCase()] = options.type;
  const signedValues = (config.signedHeaders ?? []).map((name) => {
    const value = headers[name.toLowerCase()];
    if (value === undefined) throw new Error(`signedDelivery('hmac'): signed header ${name} has no value (set idHeader/typeHeader, or pass it)`);
    return `${value}.`;
  });
  const parts = [...(config.timestampHeader ? [`${timestamp}.`] : []), ...signedValues, body];
  headers[config.signatureHeader.toLowerCase()] = `${config.signaturePrefix ?? ''}${hmacParts(secret, ...parts).toString(config.encoding)}`;
  return { body, headers, eventId: id };
}

const location = z.union([z.object({ header: z.string().min(1) }).strict(), z.object({ field: z.string().min(1) }).strict()]);

/** In-house senders: declared only in ONCEHOOK_SOURCES_FILE, with how they sign. */
export const GENERIC_HMAC_ADAPTER = defineAdapter({
  kind: 'hmac',
  title: 'In-house HMAC',
  docs: 'docs/providers.md',
  env: null,
  redelivery: null,
  options: {
    signatureHeader: z.string().min(1),
    encoding: z.enum(['hex', 'base64', 'base64url']),
    signaturePrefix: z.string().optional(),
    timestampHeader: z.string().optional(),
    signedHeaders: z.array(z.string().min(1)).optional(),
    bodyDedupe: z.boolean().optional(),
    toleranceSeconds: toleranceOption,
    id: location,
    type: z.union([location, z.object({ value: z.string().min(1) }).strict()]).optional(),
  },
  create: createGenericHmacSource,
  sign: signGenericHmacDelivery,
  payloads: {},
});
