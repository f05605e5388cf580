/**
 * The provider interface: verify a delivery's raw bytes and headers, and only then read the
 * stable event id out of it. Nothing is parsed as JSON before the signature checks out.
 * One file per provider beside this one; `sources.ts` builds the configured sources.
 */
import { createHash } from 'node:crypto';
import { VerificationError } from '@oncehook/shared';
import { checkPayloadLimits } from '@oncehook/shared';
import type { VerifiedEvent } from '@oncehook/shared';

/** What the edge hands a provider: exactly the bytes that arrived, and the headers. */
export interface DeliveryRequest {
  rawBody: Buffer;
  /** Header lookup, case-insensitive. Returns null when absent. */
  header(name: string): string | null;
  /** Clock used for timestamp tolerance (injectable for tests). */
  now: Date;
}

/**
 * A direct answer with nothing stored: a JSON object, a text (`text/plain`: Twitch's and Meta's
 * challenges), or no body at all (`null`, 204 unless `status` says otherwise).
 */
export interface Reply {
  body: Record<string, unknown> | string | null;
  /** Default 200 (204 for a null body). */
  status?: number;
  /** What the log says about it. */
  note: string;
}

/**
 * A verified delivery is an event to claim; or MANY events (a batch: SendGrid, HubSpot, Meta;
 * each element claimed on its own); or (rarely) a request the provider wants answered directly
 * with nothing stored: Slack's url_verification challenge, Zoom's endpoint validation, Twitch's
 * callback verification.
 */
export type Verified = { event: VerifiedEvent } | { events: VerifiedEvent[] } | { reply: Reply };

/** A configured source: one provider scheme, its secrets, its dedupe namespace (its name). */
export interface WebhookSource {
  /** Route segment and dedupe namespace. */
  readonly name: string;
  /** Scheme / provider family. */
  readonly kind: string;
  /**
   * Checks the headers the scheme needs (present, well-formed) BEFORE the body is read, and a
   * signed timestamp in them against the tolerance (it would be refused after verification
   * anyway): a request that can never verify is refused without buffering a byte of it.
   * Throws VerificationError (400; 401 for a timestamp out of tolerance).
   */
  precheck(header: DeliveryRequest['header'], now: Date): void;
  /** Throws VerificationError; returns the verified delivery otherwise. */
  verify(request: DeliveryRequest): Verified;
  /**
   * A GET to the endpoint (Meta's `hub.challenge` subscription check), answered without
   * storing anything; absent for senders that never GET (405).
   */
  get?(query: URLSearchParams): Reply;
}

/** sha256 of the raw body: the second dedupe key of sources whose event id is not signed. */
export function bodyHash(rawBody: Buffer): Buffer {
  return createHash('sha256').update(rawBody).digest();
}

/**
 * Event ids we accept: 1 to 255 characters from a conservative set (letters, digits and
 * `. _ - : @ / + = ~`). Every supported provider's ids fit (evt_..., msg_..., GUIDs, numeric
 * ids, GitHub's hook:delivery); quotes, spaces, control characters and non-ASCII never
 * occur in real ids, so an id carrying them is refused (400) before it reaches the index.
 */
const EVENT_ID_PATTERN = /^[A-Za-z0-9._:@/+=~-]{1,255}$/;

export function checkEventId(value: unknown, where: string): string {
  if (typeof value !== 'string' || !EVENT_ID_PATTERN.test(value)) {
    throw new VerificationError(400, 'invalid_event_id', `${where} must be 1-255 characters of A-Z a-z 0-9 . _ - : @ / + = ~`);
  }
  return value;
}

/** Event types: non-empty, at most 255 printable ASCII characters. */
export function checkEventType(value: unknown, where: string): string {
  if (typeof value !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(value)) {
    throw new VerificationError(400, 'malformed_payload', `${where} must be a non-empty string of at most 255 printable ASCII characters`);
  }
  return value;
}

/** A required header, or 400 naming it. */
export function requireHeader(request: Pick<DeliveryRequest, 'header'>, name: string): string {
  const value = request.header(name);
  if (value === null || value === '') throw new VerificationError(400, 'missing_header', `missing ${name} header`);
  return value;
}

/** Unix seconds in a header or signature element, or 400. */
export function parseUnixSeconds(value: string, where: string): number {
  if (!/^\d{1,12}$/.test(value)) throw new VerificationError(400, 'malformed_header', `${where} must be a Unix timestamp in seconds`);
  return Number.parseInt(value, 10);
}

/**
 * Parses a `key=value` list signature header carrying one timestamp and one or more
 * signatures (Stripe `t=..,v1=..,v1=..`; Paddle `ts=..;h1=..`). Unknown keys (Stripe's `v0`)
 * are ignored; a missing or repeated timestamp, or no signature, is a 400 naming the header.
 */
export function parseTimestampedSignatures(
  header: string,
  format: { name: string; separator: string; timestampKey: string; signatureKey: string; note?: string },
): { timestamp: number; signatures: string[] } {
  let timestamp: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(format.separator)) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === format.timestampKey) {
      if (timestamp !== null) throw new VerificationError(400, 'malformed_header', `${format.name} must carry exactly one ${format.timestampKey}= element`);
      timestamp = parseUnixSeconds(value, `${format.name} ${format.timestampKey}=`);
    } else if (key === format.signatureKey) {
      signatures.push(value);
    }
  }
  if (timestamp === null) throw new VerificationError(400, 'malformed_header', `${format.name} has no ${format.timestampKey}= element`);
  if (signatures.length === 0) throw new VerificationError(400, 'malformed_header', `${format.name} has no ${format.signatureKey}= signature${format.note ?? ''}`);
  return { timestamp, signatures };
}

/**
 * Checks a signed timestamp both ways: older than the tolerance is a replay; further in the
 * future than the tolerance is a forgery or a badly skewed clock. Two distinct 401 reasons.
 */
export function checkTimestamp(timestamp: number, now: Date, toleranceSeconds: number, where: string): void {
  const age = Math.floor(now.getTime() / 1000) - timestamp;
  // mutant: timestamp-too-old
  if (age > toleranceSeconds) {
    throw new VerificationError(401, 'timestamp_too_old', `${where} is ${age}s old (tolerance ${toleranceSeconds}s)`);
  }
  // mutant: timestamp-in-future
  if (-age > toleranceSeconds) {
    throw new VerificationError(401, 'timestamp_in_future', `${where} is ${-age}s in the future (tolerance ${toleranceSeconds}s)`);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Decodes and parses a verified body; a body that is not UTF-8 JSON is a 400, and so is one
 * over the payload limits (payload-limits.ts: numbers written out in full, nesting, printed
 * size), so that what is stored can always be read back.
 */
export function parseJsonBody(rawBody: Buffer): { text: string; json: unknown } {
  let text: string;
  try {
    text = utf8.decode(rawBody);
  } catch {
    throw new VerificationError(400, 'malformed_payload', 'body is not valid UTF-8');
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new VerificationError(400, 'malformed_payload', 'body is not valid JSON');
  }
  checkPayloadLimits(text);
  return { text, json };
}

/** parseJsonBody, requiring a JSON object. */
export function parseJsonObject(rawBody: Buffer, what: string): { text: string; json: Record<string, unknown> } {
  const { text, json } = parseJsonBody(rawBody);
  if (!isRecord(json)) throw new VerificationError(400, 'malformed_payload', `${what} body must be a JSON object`);
  return { text, json };
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Keeps the string-valued entries (for `meta`). */
export function compactMeta(entries: Record<string, string | null | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(entries).filter((entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1] !== ''));
}

/** The times we store: from the epoch to the end of year 9999 (what Postgres and JS both hold). */
const MAX_TIME_MS = Date.UTC(9999, 11, 31, 23, 59, 59);

/** Seconds since the epoch, or an ISO string, to a Date; null when absent, not a time, or out of range. */
export function toDate(value: unknown): Date | null {
  let date: Date | null = null;
  if (typeof value === 'number' && Number.isFinite(value)) date = new Date(value * 1000);
  else if (typeof value === 'string' && value.length <= 64) date = new Date(value);
  if (!date) return null;
  const ms = date.getTime();
  return Number.isNaN(ms) || ms < 0 || ms > MAX_TIME_MS ? null : date;
}

/**
 * A creation time the provider signed (Stripe `created`, Paddle `occurred_at`, ...): null when
 * the field is absent; a 400 naming the field when it is present but not a time we can store
 * (a verified payload with `created: 1e15` must be refused alone, not fail a whole batch of
 * claims in Postgres).
 */
export function signedTime(value: unknown, where: string): Date | null {
  if (value === undefined || value === null) return null;
  const date = toDate(value);
  if (!date) throw new VerificationError(400, 'malformed_payload', `${where} must be a time between 1970 and 9999 (Unix seconds or ISO 8601)`);
  return date;
}

/**
 * Where a JSON object body keeps its event: the id, the type and the signed time as top-level
 * fields (Stripe, Paddle), and the words its errors use.
 */
export interface TopLevelFields {
  /** How an error names the body (`Stripe event body must be a JSON object`). */
  body: string;
  /** How an error names a field of it (`Stripe event "id"`, `Paddle "event_id"`). */
  field: string;
  id: string;
  type: string;
  signedAt: string;
  /** Meta entries: each key's value is the top-level field of that name, when it is a string. */
  meta: Record<string, string>;
}

/** The event of a verified JSON object body whose id, type and time are top-level fields. */
export function topLevelEvent(rawBody: Buffer, source: { name: string; kind: string }, fields: TopLevelFields): VerifiedEvent {
  const { text, json } = parseJsonObject(rawBody, fields.body);
  const named = (field: string) => `${fields.field} "${field}"`;
  const meta: Record<string, string | null> = {};
  for (const [key, field] of Object.entries(fields.meta)) {
    const value = json[field];
    meta[key] = typeof value === 'string' ? value : null;
  }
  return {
    source: source.name,
    kind: source.kind,
    eventId: checkEventId(json[fields.id], named(fields.id)),
    type: checkEventType(json[fields.type], named(fields.type)),
    signedAt: signedTime(json[fields.signedAt], named(fields.signedAt)),
    rawBody: text,
    payload: json,
    meta: compactMeta(meta),
  };
}

/** Shortest secret accepted where a provider's secrets have no known shape. */
export const MIN_SECRET_LENGTH = 16;

/**
 * Checks configured secrets at start: at least one, none shorter than the provider's secrets
 * can be (a typo or a placeholder such as `x` would otherwise be an HMAC key anyone can guess).
 * Throws an Error naming the source; sources.ts turns it into a ConfigError.
 */
/**
 * The head of an adapter whose headers carry the signature and nothing time-bound (GitHub,
 * Shopify): the source's name (its kind unless declared), its secrets checked at start, a
 * precheck that parses the headers before the body is read, and `verify` given the parsed
 * headers with the request.
 */
export function headerSignedSource<Headers>(
  kind: string,
  options: { name?: string; secrets: string[] },
  secretsLabel: string,
  parseHeaders: (header: DeliveryRequest['header']) => Headers,
  verify: (request: DeliveryRequest, headers: Headers, name: string) => Verified,
): WebhookSource {
  const name = options.name ?? kind;
  checkSecrets(name, secretsLabel, options.secrets);
  return {
    name,
    kind,
    precheck(header) {
      parseHeaders(header);
    },
    verify: (request) => verify(request, parseHeaders(request.header), name),
  };
}

export function checkSecrets(source: string, provider: string, secrets: string[], check: (secret: string) => string | null = defaultSecretCheck): void {
  if (secrets.length === 0) throw new Error(`source ${source}: at least one ${provider} secret is required`);
  secrets.forEach((secret, i) => {
    const problem = check(secret);
    if (problem) throw new Error(`source ${source}: ${provider} secret #${i + 1} ${problem}`);
  });
}

function defaultSecretCheck(secret: string): string | null {
  return secret.length < MIN_SECRET_LENGTH ? `is ${secret.length} characters; use the secret the provider generated (at least ${MIN_SECRET_LENGTH})` : null;
}
