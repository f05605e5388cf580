/**
 * The event key: (source name, provider event id). What deduplicates deliveries (the unique
 * index), what names queue jobs and what outbound idempotency keys derive from. One function
 * builds it, so every place agrees.
 */
import { createHash } from 'node:crypto';

/** `provider NUL eventId`: NUL cannot occur in either part (ids are checked at the edge). */
export function eventKey(source: string, eventId: string): string {
  return `${source}\0${eventId}`;
}

/** sha256 of the event key and further parts (NUL-separated), as hex. */
export function eventKeyDigest(source: string, eventId: string, ...more: string[]): string {
  return createHash('sha256')
    .update([eventKey(source, eventId), ...more].join('\0'))
    .digest('hex');
}
