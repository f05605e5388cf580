/**
 * Schemes as data: a sender described by WHAT it signs and WHERE its id and type are, turned
 * into a WebhookSource by one engine (`createSchemeSource`). The built-in senders are entries
 * of senders.ts; an adapter file (stripe.ts, github.ts, ...) exists only for what a table entry
 * cannot say.
 *
 * The families:
 * - `hmac`: HMAC-SHA1/256/512 over a list of parts (the raw body, a timestamp, headers, the
 *   public URL, the method, literals), hex or base64, in a header (optionally a `t=..,v1=..`
 *   list). Compared as bytes, in constant time.
 * - `ed25519` / `ecdsa-p256`: an asymmetric signature over the same kind of parts, checked with
 *   the sender's PUBLIC key (configured as the source's secret).
 * - `hmac-in-body`: the signature travels inside the JSON body and covers only some fields of it
 *   (Mailgun: timestamp + token). The rest of the body is NOT authenticated: see `replayKey`.
 * - `token` / `basic`: no signature at all, a shared token in a header or Basic credentials,
 *   compared in constant time. Weaker: neither the body nor the id is authenticated, only the
 *   sender's knowledge of the token; the body hash is then always a second dedupe key.
 *
 * Verification always runs on the raw bytes, before anything is parsed; only then the id, the
 * type, a batch's elements or a handshake's answer are read.
 */
import { createHmac, createPublicKey, type KeyObject, verify as verifySignature } from 'node:crypto';
import { VerificationError } from '../errors.js';
import type { VerifiedEvent } from '../interfaces.js';
import { type DigestEncoding, decodeSignature, digestMatches, secretsEqual } from './hmac.js';
import {
  bodyHash,
  checkEventId,
  checkEventType,
  checkSecrets,
  checkTimestamp,
  compactMeta,
  isRecord,
  parseJsonBody,
  parseUnixSeconds,
  type DeliveryRequest,
  type Reply,
  type Verified,
  type WebhookSource,
} from './types.js';

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

const HASH_LENGTH: Record<HmacAlgorithm, number> = { sha1: 20, sha256: 32, sha512: 64 };
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');

/** A configured secret turned into what verifies: an HMAC key, or a public key object. */
function decodeKey(scheme: SenderScheme, secret: string): string | KeyObject {
  switch (scheme.key) {
    case 'text':
      return secret;
    case 'ed25519-hex': {
      if (!/^[0-9a-fA-F]{64}$/.test(secret)) throw new Error(`a ${scheme.title} ${scheme.secretName} is 64 hex digits (an ed25519 public key)`);
      return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(secret, 'hex')]), format: 'der', type: 'spki' });
    }
    case 'ed25519-whpk': {
      const raw = Buffer.from(secret.replace(/^whpk_/, ''), 'base64');
      if (!secret.startsWith('whpk_') || raw.length !== 32)
        throw new Error(`a ${scheme.title} ${scheme.secretName} is whpk_ followed by the base64 of a 32-byte ed25519 public key`);
      return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
    }
    case 'ecdsa-spki-base64': {
      let key: KeyObject;
      try {
        key = createPublicKey({ key: Buffer.from(secret, 'base64'), format: 'der', type: 'spki' });
      } catch {
        throw new Error(`a ${scheme.title} ${scheme.secretName} is the base64 public key the dashboard shows (an ECDSA P-256 key)`);
      }
      if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
        throw new Error(`a ${scheme.title} ${scheme.secretName} must be an ECDSA P-256 public key`);
      }
      return key;
    }
  }
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

function omit(record: Record<string, unknown>, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([key]) => !keys.includes(key)));
}

function timeOf(value: unknown, unit: 's' | 'ms' | 'iso'): Date | null {
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

function describe(spec: ValueSpec | IdSpec): string {
  if ('firstOf' in spec) return spec.firstOf.map((part) => `body field "${part.field}"`).join(' or ');
  if ('join' in spec) return spec.join.map(describe).join(' + ');
  if ('header' in spec) return `header ${spec.header}`;
  if ('field' in spec) return `body field "${Array.isArray(spec.field) ? spec.field.join('" + "') : spec.field}"`;
  if ('value' in spec) return 'type';
  return 'body hash';
}

/** Whether the signature covers a value at `spec` (a body field is covered when the body is). */
export function signatureCovers(scheme: SenderScheme, spec: ValueSpec | IdSpec): boolean {
  const { signature } = scheme;
  if ('join' in spec) return spec.join.every((part) => signatureCovers(scheme, part));
  if ('firstOf' in spec) return signatureCovers(scheme, { field: spec.firstOf[0]?.field ?? '' });
  if (signature.family === 'token' || signature.family === 'basic' || signature.family === 'hmac-in-body') return 'value' in spec || 'bodyHash' in spec;
  if ('value' in spec || 'bodyHash' in spec) return true;
  if ('field' in spec) return signature.signed.includes('body') || signature.signed.includes('form-params-sorted');
  return signature.signed.some((part) => typeof part === 'object' && 'header' in part && part.header.toLowerCase() === spec.header.toLowerCase());
}

/**
 * Whether the body hash must be a second dedupe key: when the id (or the type) travels where
 * the signature does not reach, a captured body replayed under a new id or type is a duplicate.
 */
export function needsBodyDedupe(scheme: SenderScheme): boolean {
  if (scheme.batch) return false; // elements are keyed by their own ids (or hashes)
  const id = scheme.id ?? { bodyHash: true };
  const type = scheme.type ?? { value: 'webhook' };
  return !signatureCovers(scheme, id) || !signatureCovers(scheme, type) || scheme.signature.family === 'hmac-in-body';
}

interface Parsed {
  signatures: string[];
  timestampText: string | null;
}

/** The signature and timestamp headers, checked for presence and shape (before the body). */
function parseHeaders(scheme: SenderScheme, header: DeliveryRequest['header']): Parsed {
  const { signature, timestamp } = scheme;
  const need = (name: string) => {
    const value = header(name);
    if (value === null || value === '') throw new VerificationError(400, 'missing_header', `missing ${name} header`);
    return value;
  };
  let timestampText: string | null = timestamp && 'header' in timestamp.from ? need(timestamp.from.header) : null;
  if (signature.family === 'token') {
    need(signature.header);
    return { signatures: [], timestampText };
  }
  if (signature.family === 'basic') {
    if (!/^Basic [A-Za-z0-9+/]+=*$/.test(header('Authorization') ?? '')) {
      throw new VerificationError(401, 'bad_credentials', 'missing Authorization: Basic credentials (set them in the webhook URL as the sender documents)');
    }
    return { signatures: [], timestampText };
  }
  if (signature.family === 'hmac-in-body') return { signatures: [], timestampText };
  const value = need(signature.header);
  const prefix = 'prefix' in signature ? (signature.prefix ?? '') : '';
  if ('list' in signature && signature.list) {
    const list = signature.list;
    const signatures: string[] = [];
    for (const part of value.split(list.separator)) {
      const eq = part.indexOf('=');
      const key = part.slice(0, eq).trim();
      const element = part.slice(eq + 1).trim();
      if (key === list.timestampKey) {
        if (timestampText !== null) throw new VerificationError(400, 'malformed_header', `${signature.header} must carry exactly one ${list.timestampKey}= element`);
        timestampText = element;
      } else if (key === list.signatureKey) signatures.push(element);
    }
    if (timestamp && 'list' in timestamp.from && timestampText === null)
      throw new VerificationError(400, 'malformed_header', `${signature.header} has no ${list.timestampKey}= element`);
    if (signatures.length === 0) throw new VerificationError(400, 'malformed_header', `${signature.header} has no ${list.signatureKey}= signature`);
    return { signatures, timestampText };
  }
  if (!value.startsWith(prefix)) throw new VerificationError(400, 'malformed_header', `${signature.header} must start with "${prefix}"`);
  const received = value.slice(prefix.length);
  const expectedLength = signature.family === 'hmac' ? HASH_LENGTH[signature.algorithm] : null;
  const bytes = decodeSignature(received, signature.encoding);
  if (bytes === null || (expectedLength !== null && bytes.length !== expectedLength)) {
    throw new VerificationError(
      400,
      'malformed_header',
      `${signature.header} must be ${prefix}<${signature.encoding} of a ${expectedLength ?? 'signature'}${expectedLength ? '-byte digest' : ''}>`,
    );
  }
  return { signatures: [received], timestampText };
}

/** The signed time as a Date (401 reasons for too old / in the future come from checkTimestamp). */
function parseTimestamp(spec: TimestampSpec, text: string, where: string): number {
  if (spec.unit === 's') return parseUnixSeconds(text, where);
  const date = timeOf(spec.unit === 'ms' && /^\d{1,15}$/.test(text) ? Number(text) : text, spec.unit);
  if (!date) throw new VerificationError(400, 'malformed_header', `${where} must be ${spec.unit === 'ms' ? 'Unix milliseconds' : 'an RFC 3339 time'}`);
  return Math.floor(date.getTime() / 1000);
}

function timestampWhere(scheme: SenderScheme): string {
  const from = scheme.timestamp?.from;
  if (!from) return 'timestamp';
  if ('header' in from) return from.header;
  if ('field' in from) return `body field "${from.field}"`;
  return `${scheme.signature.family !== 'token' && 'header' in scheme.signature ? scheme.signature.header : 'signature'} timestamp`;
}

export function createSchemeSource(scheme: SenderScheme, options: SchemeSourceOptions): WebhookSource {
  const name = options.name ?? scheme.kind;
  const tolerance = options.toleranceSeconds ?? scheme.timestamp?.toleranceSeconds ?? 300;
  const minLength = scheme.minSecretLength ?? 16;
  // The names of the variables that go with the secret (sources.ts senderVariables spells them the same way).
  const variable = scheme.kind.toUpperCase().replace(/-/g, '_');
  checkSecrets(name, `${scheme.title} ${scheme.secretName}`, options.secrets, (secret) => {
    if (scheme.signature.family === 'basic' && !/^[^:]+:.+$/.test(secret)) return 'must be user:password, as in the webhook URL you give the sender';
    if (scheme.key !== 'text' || secret.length >= minLength) return null;
    return scheme.signature.family === 'basic'
      ? `is ${secret.length} characters; choose credentials of at least ${minLength}`
      : `is ${secret.length} characters; use the ${scheme.secretName} ${scheme.title} generated (at least ${minLength})`;
  });
  const keys = options.secrets.map((secret) => {
    try {
      return { secret, key: decodeKey(scheme, secret) };
    } catch (error) {
      throw new Error(`source ${name}: ${(error as Error).message}`, { cause: error });
    }
  });
  const signature = scheme.signature;
  const signsUrl = 'signed' in signature && signature.signed.includes('url');
  if (signsUrl && !options.url) {
    throw new Error(
      `source ${name}: ${scheme.title} signs the URL it posts to: set ${variable}_WEBHOOK_URL (or "url" in ONCEHOOK_SOURCES_FILE) to the public URL of /webhooks/${name} exactly as configured in ${scheme.title}`,
    );
  }
  if (scheme.get && !options.verifyToken) {
    throw new Error(
      `source ${name}: ${scheme.title} checks the endpoint with a GET carrying your verify token: set ${variable}_VERIFY_TOKEN (or "verifyToken" in ONCEHOOK_SOURCES_FILE)`,
    );
  }
  const dedupeOnBody = needsBodyDedupe(scheme);

  /** The signed content for one request. */
  const content = (parts: SignedPart[], request: DeliveryRequest, timestampText: string | null): Buffer => {
    const pieces = parts.map((part): Buffer => {
      if (part === 'body') return request.rawBody;
      if (part === 'timestamp') return Buffer.from(timestampText ?? '', 'utf8');
      if (part === 'url') return Buffer.from(options.url ?? '', 'utf8');
      if (part === 'method') return Buffer.from('POST', 'utf8');
      if (part === 'form-params-sorted') return Buffer.from(sortedFormParams(formParams(request.rawBody)), 'utf8');
      if ('literal' in part) return Buffer.from(part.literal, 'utf8');
      return Buffer.from(request.header(part.header) ?? '', 'utf8');
    });
    return Buffer.concat(pieces);
  };

  /** Checks the signature; returns the secret that verified (the Zoom handshake needs it). */
  const authenticate = (request: DeliveryRequest, parsed: Parsed, json: () => unknown): string => {
    switch (signature.family) {
      case 'hmac': {
        const data = content(signature.signed, request, parsed.timestampText);
        for (const { secret, key } of keys) {
          const expected = createHmac(signature.algorithm, key as string)
            .update(data)
            .digest();
          if (parsed.signatures.some((candidate) => digestMatches(expected, candidate, signature.encoding))) return secret;
        }
        throw new VerificationError(401, 'bad_signature', `${signature.header} does not match the body with any configured ${scheme.secretName}`);
      }
      case 'ed25519':
      case 'ecdsa-p256': {
        const data = content(signature.signed, request, parsed.timestampText);
        const received = decodeSignature(parsed.signatures[0] ?? '', signature.encoding);
        for (const { secret, key } of keys) {
          // ed25519 takes no digest name; ECDSA P-256 signs the SHA-256 of the content (DER).
          const ok = received !== null && verifySignature(signature.family === 'ed25519' ? null : 'sha256', data, key as KeyObject, received);
          if (ok) return secret;
        }
        throw new VerificationError(401, 'bad_signature', `${signature.header} is not a signature of the body by any configured ${scheme.secretName}`);
      }
      case 'hmac-in-body': {
        const holder = fieldAt(json(), signature.object);
        const text = (field: string) => {
          const value = isRecord(holder) ? holder[field] : undefined;
          if (typeof value !== 'string' && typeof value !== 'number') throw new VerificationError(400, 'malformed_payload', `body field "${signature.object}.${field}" is missing`);
          return String(value);
        };
        const data = signature.signedFields.map(text).join('');
        const received = text(signature.signatureField);
        for (const { secret, key } of keys) {
          const expected = createHmac(signature.algorithm, key as string)
            .update(data)
            .digest();
          if (digestMatches(expected, received, signature.encoding)) return secret;
        }
        throw new VerificationError(401, 'bad_signature', `"${signature.object}.${signature.signatureField}" does not match with any configured ${scheme.secretName}`);
      }
      case 'token': {
        const received = request.header(signature.header) ?? '';
        const token = keys.find(({ secret }) => secretsEqual(secret, received));
        if (!token) throw new VerificationError(401, 'bad_credentials', `${signature.header} is not a configured ${scheme.secretName}`);
        return token.secret;
      }
      case 'basic': {
        const received = Buffer.from((request.header('Authorization') ?? '').slice('Basic '.length), 'base64').toString('utf8');
        const match = keys.find(({ secret }) => secretsEqual(secret, received));
        if (!match) throw new VerificationError(401, 'bad_credentials', `the Basic credentials are not the configured ${scheme.secretName} (user:password)`);
        return match.secret;
      }
    }
  };

  const valueAt = (spec: ValueSpec, json: unknown, header: DeliveryRequest['header']): unknown => {
    if ('value' in spec) return spec.value;
    if ('header' in spec) return header(spec.header);
    if ('firstOf' in spec) {
      for (const part of spec.firstOf) {
        const value = fieldAt(json, part.field);
        if (typeof value === 'string' && value !== '') return `${part.prefix}${value}`;
      }
      return spec.default;
    }
    if ('join' in spec) {
      const parts = spec.join.map((part) => valueAt(part, json, header)).filter((v) => typeof v === 'string' && v !== '');
      return parts.length ? parts.join('.') : undefined;
    }
    const fields = Array.isArray(spec.field) ? spec.field : [spec.field];
    const values = fields.map((field) => fieldAt(json, field)).filter((v) => typeof v === 'string' && v !== '');
    // A compound type (`Issue` + `create`): the parts present, joined with dots.
    return values.length ? values.join('.') : spec.default;
  };

  const idOf = (spec: IdSpec, json: unknown, text: string, header: DeliveryRequest['header']): string => {
    if ('bodyHash' in spec) return `sha256:${bodyHash(Buffer.from(text, 'utf8')).toString('hex')}`;
    const raw = 'header' in spec ? header(spec.header) : fieldAt(json, spec.field);
    return checkEventId(typeof raw === 'number' && Number.isSafeInteger(raw) ? String(raw) : raw, describe(spec));
  };

  const signedAtOf = (spec: { field: string; unit: 's' | 'ms' | 'iso' } | undefined, json: unknown): Date | null => {
    if (!spec) return null;
    const value = fieldAt(json, spec.field);
    if (value === undefined || value === null) return null;
    const date = timeOf(value, spec.unit);
    if (!date) throw new VerificationError(400, 'malformed_payload', `body field "${spec.field}" must be a time (${spec.unit})`);
    return date;
  };

  const meta = compactMeta({ sender: scheme.kind });

  return {
    name,
    kind: scheme.kind,
    precheck(header, now) {
      const parsed = parseHeaders(scheme, header);
      if (scheme.timestamp && parsed.timestampText !== null) {
        checkTimestamp(parseTimestamp(scheme.timestamp, parsed.timestampText, timestampWhere(scheme)), now, tolerance, timestampWhere(scheme));
      }
    },
    get: scheme.get ? (query) => scheme.get!(query, options) : undefined,
    verify(request: DeliveryRequest): Verified {
      const parsed = parseHeaders(scheme, request.header);
      let parsedBody: { text: string; json: unknown } | null = null;
      const body = () => {
        parsedBody ??= scheme.body === 'form' ? parseJsonBody(Buffer.from(JSON.stringify(formParams(request.rawBody)), 'utf8')) : parseJsonBody(request.rawBody);
        return parsedBody;
      };
      // The signature first (for hmac-in-body, the body must be parsed to find it).
      const secret = authenticate(request, parsed, () => body().json);
      let timestampText = parsed.timestampText;
      if (scheme.timestamp && 'field' in scheme.timestamp.from) {
        const value = fieldAt(body().json, scheme.timestamp.from.field);
        timestampText = value === undefined || value === null ? null : String(value);
        if (timestampText === null) throw new VerificationError(400, 'malformed_payload', `body field "${scheme.timestamp.from.field}" (the signed time) is missing`);
      }
      if (timestampText !== null) {
        const spec = scheme.timestamp ?? { unit: 's' as const, toleranceSeconds: tolerance, from: { list: true as const } };
        checkTimestamp(parseTimestamp(spec, timestampText, timestampWhere(scheme)), request.now, tolerance, timestampWhere(scheme));
      }

      const { text, json } = body();
      const reply = scheme.handshake?.({ json, header: request.header, secret });
      if (reply) return { reply };

      if (scheme.batch) {
        const batch = scheme.batch;
        const items = fieldAt(json, batch.items);
        if (!Array.isArray(items) || items.length === 0) {
          throw new VerificationError(400, 'malformed_payload', `${scheme.title} body must carry a non-empty array${batch.items === '$' ? '' : ` at "${batch.items}"`}`);
        }
        const events = items.map((item, i): VerifiedEvent => {
          if (!isRecord(item)) throw new VerificationError(400, 'malformed_payload', `${scheme.title} element #${i + 1} is not a JSON object`);
          const itemText = JSON.stringify(item);
          return {
            provider: name,
            kind: scheme.kind,
            eventId: idOf(batch.id, item, itemText, request.header),
            type: checkEventType(valueAt(batch.type, item, request.header), `element #${i + 1} ${describe(batch.type)}`),
            signedAt: signedAtOf(batch.signedAt, item),
            rawBody: itemText,
            payload: item,
            meta: { ...meta, element: String(i) },
            bodyHash: batch.contentKeyWithout ? bodyHash(Buffer.from(JSON.stringify(omit(item, batch.contentKeyWithout)), 'utf8')) : null,
          };
        });
        return { events };
      }

      if (!isRecord(json)) throw new VerificationError(400, 'malformed_payload', `${scheme.title} body must be a JSON object`);
      const idSpec = scheme.id ?? { bodyHash: true };
      const typeSpec = scheme.type ?? { value: 'webhook' };
      const replay = scheme.replayKey === undefined ? null : fieldAt(json, scheme.replayKey);
      return {
        event: {
          provider: name,
          kind: scheme.kind,
          eventId: idOf(idSpec, json, text, request.header),
          type: checkEventType(valueAt(typeSpec, json, request.header), describe(typeSpec)),
          signedAt: signedAtOf(scheme.signedAt, json),
          rawBody: text,
          payload: json,
          meta,
          // A replay key (a per-signature token) dedupes signatures; else the body dedupes bodies.
          bodyHash: replay !== null ? bodyHash(Buffer.from(`replay\0${String(replay)}`, 'utf8')) : dedupeOnBody ? bodyHash(request.rawBody) : null,
        },
      };
    },
  };
}
