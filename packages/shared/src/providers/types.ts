/**
 * The provider interface: verify a delivery's raw bytes and headers, and only then read the
 * stable event id out of it. Nothing is parsed as JSON before the signature checks out.
 */
import type { VerifiedEvent } from '../interfaces';

/** What the edge hands a provider: exactly the bytes that arrived, and the headers. */
export interface DeliveryRequest {
  rawBody: Buffer;
  /** Header lookup, case-insensitive. Returns null when absent. */
  header(name: string): string | null;
  /** Clock used for timestamp tolerance (injectable for tests). */
  now: Date;
}

export type VerificationReason =
  | 'missing_header'
  | 'malformed_header'
  | 'bad_signature'
  | 'timestamp_too_old'
  | 'timestamp_in_future'
  | 'malformed_payload'
  | 'invalid_event_id';

/**
 * The delivery is not acceptable as sent. `status` is what the edge answers (400: the request
 * is malformed; 401: it is well-formed but not authentic or not fresh); `reason` is a stable
 * code for metrics and logs; the message says exactly what was wrong, for the sender's
 * developer. Nothing is stored for a delivery that fails verification.
 */
export class VerificationError extends Error {
  override name = 'VerificationError';
  constructor(
    readonly status: 400 | 401,
    readonly reason: VerificationReason,
    message: string,
  ) {
    super(message);
  }
}

/** A configured source: one provider scheme, its secrets, its dedupe namespace (its name). */
export interface WebhookSource {
  /** Route segment and dedupe namespace. */
  readonly name: string;
  /** Scheme / provider family. */
  readonly kind: string;
  /** Throws VerificationError; returns the verified event otherwise. */
  verify(request: DeliveryRequest): VerifiedEvent;
}

/**
 * Event ids we accept: 1 to 255 printable ASCII characters. Every supported provider's ids
 * fit (evt_..., msg_..., GUIDs, numeric ids); anything else is a malformed or hostile request,
 * refused before it can reach the unique index.
 */
const EVENT_ID_PATTERN = /^[\x21-\x7e]{1,255}$/;

export function checkEventId(value: unknown, where: string): string {
  if (typeof value !== 'string' || !EVENT_ID_PATTERN.test(value)) {
    throw new VerificationError(400, 'invalid_event_id', `${where} must be 1-255 printable ASCII characters`);
  }
  return value;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes and parses a verified body; a body that is not UTF-8 JSON is a 400. */
export function parseJsonBody(rawBody: Buffer): { text: string; json: unknown } {
  let text: string;
  try {
    text = utf8.decode(rawBody);
  } catch {
    throw new VerificationError(400, 'malformed_payload', 'body is not valid UTF-8');
  }
  try {
    return { text, json: JSON.parse(text) };
  } catch {
    throw new VerificationError(400, 'malformed_payload', 'body is not valid JSON');
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
