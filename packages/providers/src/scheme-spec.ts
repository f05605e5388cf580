/**
 * The vocabulary of a sender described as data (scheme.ts turns one into a WebhookSource): what
 * it signs, where its id, type and time are, and the small readers of a parsed body those
 * places need.
 */
import { VerificationError } from '@oncehook/shared';
import type { DigestEncoding } from './hmac.js';
import { isRecord, type DeliveryRequest, type Reply } from './types.js';

/** One piece of the signed content, in order. */
export type SignedPart =
  /** The raw body, byte for byte. */
  | 'body'
  /** The timestamp's text exactly as sent (header, list element). */
  | 'timestamp'
  /** The public URL the sender posts to (the source's `url` option). */
  | 'url'
  /** The HTTP method, `POST`. */
  | 'method'
  /** A form body's parameters sorted by name, each name followed by its value (Twilio). */
  | 'form-params-sorted'
  | { literal: string }
  | { header: string };

export type HmacAlgorithm = 'sha1' | 'sha256' | 'sha512';

export type SignatureSpec =
  | {
      family: 'hmac';
      algorithm: HmacAlgorithm;
      header: string;
      encoding: DigestEncoding;
      /** Text before the digest (`sha256=`, `v0=`). */
      prefix?: string;
      /** The header is a list such as `t=<ts>,v1=<sig>[,v1=<sig>]`. */
      list?: { separator: string; timestampKey: string; signatureKey: string };
      signed: SignedPart[];
    }
  | { family: 'ed25519' | 'ecdsa-p256'; header: string; encoding: DigestEncoding; signed: SignedPart[] }
  | {
      family: 'hmac-in-body';
      algorithm: HmacAlgorithm;
      encoding: DigestEncoding;
      /** Dot path of the object holding the fields, e.g. `signature`. */
      object: string;
      /** Fields of that object: what is signed (concatenated, in order) and the signature. */
      signedFields: string[];
      signatureField: string;
      timestampField: string;
    }
  | { family: 'token'; header: string }
  | { family: 'basic' };

/** Where a signed timestamp is, and how it is written. */
export interface TimestampSpec {
  from: { header: string } | { list: true } | { field: string };
  unit: 's' | 'ms' | 'iso';
  toleranceSeconds: number;
}

/**
 * Where a value is: a header, a body field (dot path, array elements by index; a list of paths
 * joins the values present with `.`; `default` when none is), a constant, or several of these
 * joined with `.` (Sentry: the resource header + the body's action).
 */
export type ValueSpec =
  | { header: string }
  | { field: string | string[]; default?: string }
  | { value: string }
  | { join: ValueSpec[] }
  /** The first field present, with its prefix (Twilio: `message.` + MessageStatus, `call.` + CallStatus). */
  | { firstOf: { field: string; prefix: string }[]; default: string };

/** The id: a header, a field, or none (the body's sha256 is the id). */
export type IdSpec = { header: string } | { field: string } | { bodyHash: true };

export interface BatchSpec {
  /** Dot path of the array of elements; `$` when the body itself is the array. */
  items: string;
  /** Per element. `bodyHash` there means the sha256 of the element's JSON text. */
  id: IdSpec;
  type: ValueSpec;
  signedAt?: { field: string; unit: 's' | 'ms' | 'iso' };
  /**
   * A second dedupe key per element: the sha256 of the element without these fields. For a
   * sender whose element ids are reported to change on retries (SendGrid's sg_event_id): a
   * retried element with a new id but the same content is then a duplicate.
   */
  contentKeyWithout?: string[];
}

/** What a handshake or a notice sees: the verified, parsed body and the headers. */
export interface HandshakeInput {
  json: unknown;
  header: DeliveryRequest['header'];
  /** The key that verified the delivery (Zoom answers with an HMAC of it). */
  secret: string;
}

/** The secret's shape: text, or a public key in one of the senders' encodings. */
export type KeySpec = 'text' | 'ed25519-hex' | 'ed25519-whpk' | 'ecdsa-spki-base64';

export interface SenderScheme {
  /** The kind (`kind` in a sources file), also the default source name and URL segment. */
  kind: string;
  title: string;
  /** The variable that enables `/webhooks/<kind>` with its comma-separated secrets. */
  env: string;
  /** What the secret is called in the sender's dashboard (error messages). */
  secretName: string;
  key: KeySpec;
  /** Shortest secret the sender generates (default 16); public keys are checked by decoding. */
  minSecretLength?: number;
  signature: SignatureSpec;
  timestamp?: TimestampSpec;
  /**
   * The body's format: JSON (default; an object, or an array of elements with `batch.items: '$'`),
   * or `form` (`application/x-www-form-urlencoded`: its parameters become the stored JSON object).
   */
  body?: 'json' | 'form';
  id?: IdSpec;
  type?: ValueSpec;
  signedAt?: { field: string; unit: 's' | 'ms' | 'iso' };
  /** Many events per delivery: each element claimed on its own. */
  batch?: BatchSpec;
  /**
   * For `hmac-in-body`: a value that is unique per SIGNATURE (Mailgun's token), used as the
   * second dedupe key, so a captured signature cannot carry a second, forged body.
   */
  replayKey?: string;
  /** A verified request the sender wants answered directly, nothing stored; null for an event. */
  handshake?: (input: HandshakeInput) => Reply | null;
  /** GET requests to the endpoint (Meta's subscription check); absent: 405. */
  get?: (query: URLSearchParams, options: SchemeSourceOptions) => Reply;
  /** How long the sender redelivers on its own (the retention refusal); null when unknown. */
  redelivery: { days: number; what: string } | null;
  /** A development secret (symmetric) or key pair (asymmetric: `public` verifies, `private` signs). */
  dev: string | { public: string; private: string };
  /** The sender's documentation of the scheme. */
  docs: string;
}

export interface SchemeSourceOptions {
  name?: string;
  secrets: string[];
  toleranceSeconds?: number;
  /** The public URL the sender posts to, for schemes that sign it (HubSpot v3, Square). */
  url?: string;
  /** Meta's verify token (the GET subscription check). */
  verifyToken?: string;
}

/** Value at a dot path of a parsed body. */
export function fieldAt(json: unknown, path: string): unknown {
  if (path === '$') return json;
  let current: unknown = json;
  for (const key of path.split('.')) {
    if (Array.isArray(current) && /^\d+$/.test(key)) current = current[Number(key)];
    else if (isRecord(current)) current = current[key];
    else return undefined;
  }
  return current;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A form body's parameters (a repeated name keeps its last value, as Twilio never repeats one). */
export function formParams(rawBody: Buffer): Record<string, string> {
  let text: string;
  try {
    text = utf8.decode(rawBody);
  } catch {
    throw new VerificationError(400, 'malformed_payload', 'form body is not valid UTF-8');
  }
  return Object.fromEntries(new URLSearchParams(text));
}

/** The `form-params-sorted` part: each parameter name followed by its value, sorted by name (Twilio). */
export function sortedFormParams(params: Record<string, string>): string {
  return Object.keys(params)
    .sort()
    .map((key) => key + params[key])
    .join('');
}

export function omit(record: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([key]) => !keys.includes(key)));
}

export function timeOf(value: unknown, unit: 's' | 'ms' | 'iso'): Date | null {
  if (unit === 'iso') {
    if (typeof value !== 'string' || value.length > 64) return null;
    const date = new Date(value);
    return Number.isNaN(date.getTime()) ? null : date;
  }
  const n = typeof value === 'string' && /^\d{1,15}(\.\d+)?$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) return null;
  const date = new Date(unit === 's' ? n * 1000 : n);
  return date.getTime() > Date.UTC(9999, 11, 31) ? null : date;
}

export function describe(spec: ValueSpec | IdSpec): string {
  if ('firstOf' in spec) return spec.firstOf.map((part) => `body field "${part.field}"`).join(' or ');
  if ('join' in spec) return spec.join.map(describe).join(' + ');
  if ('header' in spec) return `header ${spec.header}`;
  if ('field' in spec) return `body field "${Array.isArray(spec.field) ? spec.field.join('" + "') : spec.field}"`;
  if ('value' in spec) return 'type';
  return 'body hash';
}
