/**
 * The small pieces every provider's signer uses (the signers live beside their verifiers, in
 * each adapter's file): the clock, HMAC-SHA256 over parts, a payload as an object, a body id.
 */
import { createHmac } from 'node:crypto';

/** Unix seconds now. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/** `content-type: application/json`, the header every JSON delivery carries. */
export const JSON_CONTENT = { 'content-type': 'application/json' } as const;

/** HMAC-SHA256 of the parts, in order. */
export function hmacParts(key: string | Buffer, ...parts: string[]): Buffer {
  const mac = createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** The payload as an object to fill in (a JSON string is parsed; an object is copied). */
export function objectPayload(payload: unknown): Record<string, unknown> {
  if (typeof payload === 'string') return JSON.parse(payload) as Record<string, unknown>;
  return { ...(payload as Record<string, unknown>) };
}

/** The payload as the bytes to send: a JSON string as is, anything else serialised. */
export function bodyText(payload: unknown, object: unknown = payload): string {
  return typeof payload === 'string' ? payload : JSON.stringify(object);
}

/** Puts `id` in the body's `field` (the payload's own id, else a fresh one, when not given). */
export function bodyId(object: Record<string, unknown>, field: string, payload: unknown, id: string | undefined, fresh: () => string): void {
  if (id === undefined) {
    object[field] ??= fresh();
    return;
  }
  if (typeof payload === 'string' && object[field] !== undefined && object[field] !== id) {
    throw new Error(`signedDelivery: the payload is sent byte for byte and its ${field} is "${String(object[field])}", not "${id}": change it in the payload, or leave out the id`);
  }
  object[field] = id;
}
