/**
 * One call to a destination: the event as a signed Standard Webhooks request, and what its
 * answer means (docs/destinations.md, "Delivery semantics").
 *
 *   2xx                                   delivered: the step records status, time, an excerpt
 *   408, 409, 425, 429, 5xx               retried with the run's backoff; `Retry-After` is
 *                                         honoured (RetryLaterError, capped at 10 minutes)
 *   no answer (timeout, connection error) retried
 *   3xx                                   a dead letter, unless the destination follows
 *                                         redirects: then 307/308 are followed (the POST
 *                                         stays a POST; 301/302/303 would turn it into a
 *                                         GET: a dead letter), up to 5 hops, never https ->
 *                                         http, its headers dropped once a hop leaves the
 *                                         origin
 *   a refused address (link-local, metadata, any IPv6 form, at any hop): a dead letter
 *   any other 4xx                         a dead letter at this attempt (PermanentError with the
 *                                         status and an excerpt of the answer)
 *
 * The call is abandoned when the step's signal aborts (the lease clock: a call never outlives
 * its lease) or after the destination's timeout. At most MAX_ANSWER_BYTES of an answer are
 * read; the excerpt recorded is shorter still. Secrets (the signing key, configured headers)
 * never appear in what is recorded or logged.
 */
import type { Destination } from './destination-config.js';
import { createHmac, sign } from 'node:crypto';
import { PermanentError, parseRetryAfter, RetryLaterError } from '@oncehook/sdk';
import { OutboundRefusedError, outboundFetch, outboundUrlProblem, redactSecrets } from '@oncehook/shared';

/** Most bytes of an answer read (the rest is dropped unread). */
export const MAX_ANSWER_BYTES = 64 * 1024;
/** Characters of an answer kept in the run's record (the timeline's excerpt). */
const EXCERPT_CHARS = 300;
/** Redirects followed at most, when a destination allows them. */
const MAX_REDIRECTS = 5;

/** Statuses worth another attempt: timeouts, conflicts in flight, too early, too many, server errors. */
export function isRetryableStatus(status: number): boolean {
  // mutant: destination-409-dead-letter
  return status === 408 || status === 409 || status === 425 || status === 429 || status >= 500;
}

/** What a delivered call recorded (the step's result). */
export interface Delivered {
  status: number;
  ms: number;
  /** The start of the answer's body, for the timeline. */
  excerpt: string;
}

/** How a call ended, for the metrics (bounded labels). */
export type CallOutcome = 'delivered' | 'retry' | 'rejected' | 'unreachable';

export interface ForwardObserver {
  started?(destination: string): void;
  ended?(destination: string, outcome: CallOutcome, seconds: number): void;
}

/**
 * The Standard Webhooks headers of one call: `webhook-id` (the step's key: the same for this
 * event, destination and generation on every attempt), `webhook-timestamp` (now), and
 * `webhook-signature`: `v1,<base64 HMAC-SHA256>` over `<id>.<timestamp>.<body>`, plus
 * `v1a,<base64 ed25519>` when a signing key is configured. Exported for the tests' oracle.
 */
export function signatureHeaders(destination: Pick<Destination, 'hmacKey' | 'signingKey'>, id: string, body: string, timestamp: number): Record<string, string> {
  // mutant: destination-signature-without-body
  const signed = `${id}.${timestamp}.${body}`;
  const signatures = [`v1,${createHmac('sha256', destination.hmacKey).update(signed).digest('base64')}`];
  if (destination.signingKey) signatures.push(`v1a,${sign(null, Buffer.from(signed), destination.signingKey).toString('base64')}`);
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatures.join(' ') };
}

/**
 * Refuses a destination whose host is, or now resolves to, a link-local, unspecified or cloud
 * metadata address (in any IPv6 form), unless it allows them: checked at start, so a mistake
 * stops the worker with this message. Every call is checked again where it connects
 * (outboundFetch). Null when fine, else why not.
 */
export async function destinationAddressProblem(destination: Pick<Destination, 'name' | 'url' | 'allowLinkLocal'>): Promise<string | null> {
  const problem = await outboundUrlProblem(destination.url, { allowLinkLocal: destination.allowLinkLocal });
  return problem ? `destination "${destination.name}": ${problem}; set allowLinkLocal: true if that really is the service` : null;
}

/** Reads at most MAX_ANSWER_BYTES of a body, as text. */
async function readAnswer(response: Awaited<ReturnType<typeof outboundFetch>>): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < MAX_ANSWER_BYTES) {
      const { value, done } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return Buffer.concat(chunks).subarray(0, MAX_ANSWER_BYTES).toString('utf8');
}

const excerptOf = (text: string) => (text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS)}...` : text).replace(/\s+/g, ' ').trim();

/**
 * Sends one call. Resolves with what was delivered; throws RetryLaterError / a plain Error
 * (retried), PermanentError (a dead letter), or the signal's reason when it aborted.
 */
export async function forward(
  destination: Destination,
  call: { id: string; body: string; source: string; type: string; eventId: string; signal: AbortSignal },
  observer: ForwardObserver = {},
): Promise<Delivered> {
  const headers = {
    ...destination.headers,
    'content-type': 'application/json',
    'user-agent': 'Oncehook',
    'idempotency-key': call.id,
    'x-oncehook-source': call.source,
    'x-oncehook-type': call.type,
    'x-oncehook-event-id': call.eventId,
    ...signatureHeaders(destination, call.id, call.body, Math.floor(Date.now() / 1000)),
  };
  // Whatever is recorded or logged (an error, the answer's excerpt) has the configured header
  // values scrubbed: a receiver that echoes its request cannot put them in the run's record.
  const secrets = Object.values(destination.headers);
  const timeout = AbortSignal.timeout(destination.timeoutMs);
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;
  observer.started?.(destination.name);
  let outcome: CallOutcome = 'unreachable';
  try {
    let response: Awaited<ReturnType<typeof outboundFetch>>;
    try {
      // The address is checked where each connection is made, redirects only as outboundFetch
      // allows (307/308, never https -> http, MAX_REDIRECTS hops, the configured headers
      // dropped when a hop leaves the origin).
      response = await outboundFetch(destination.url, {
        method: 'POST',
        body: call.body,
        headers,
        followRedirects: destination.followRedirects,
        maxRedirects: MAX_REDIRECTS,
        originHeaders: Object.keys(destination.headers),
        policy: { allowLinkLocal: destination.allowLinkLocal },
        signal: AbortSignal.any([call.signal, timeout]),
      });
    } catch (error) {
      if (call.signal.aborted) throw call.signal.reason ?? error;
      const refused = refusal(error);
      if (refused) {
        outcome = 'rejected';
        throw new PermanentError(
          redactSecrets(
            `destination "${destination.name}": ${refused.message}${refused.reason === 'address' ? '; set allowLinkLocal: true if that really is the service' : ''}`,
            secrets,
          ),
        );
      }
      const why = timeout.aborted ? `no answer within ${destination.timeoutMs} ms (timeoutMs)` : `no answer: ${describeFetchError(error)}`;
      throw new Error(redactSecrets(`destination "${destination.name}": ${why}`, secrets));
    }
    const answer = await readAnswer(response).catch(() => '');
    const ms = Math.round(seconds() * 1000);
    // mutant: destination-excerpt-unredacted
    const excerpt = redactSecrets(excerptOf(answer), secrets);
    const said = `answered ${response.status} in ${ms} ms${excerpt ? `: ${excerpt}` : ''}`;
    if (response.status >= 200 && response.status < 300) {
      outcome = 'delivered';
      return { status: response.status, ms, excerpt };
    }
    if (isRetryableStatus(response.status)) {
      outcome = 'retry';
      const after = parseRetryAfter(response.headers.get('retry-after'));
      if (after !== null) throw new RetryLaterError(`destination "${destination.name}" ${said} (Retry-After: ${Math.round(after / 1000)} s)`, after);
      throw new Error(`destination "${destination.name}" ${said}`);
    }
    outcome = 'rejected';
    if (response.status >= 300 && response.status < 400) {
      throw new PermanentError(
        `destination "${destination.name}" ${said}; a redirect${destination.followRedirects ? ' that cannot be followed (no Location, or not 301-308)' : ' (redirects are not followed: set followRedirects: true, or fix the URL)'}`,
      );
    }
    throw new PermanentError(`destination "${destination.name}" ${said}`);
  } finally {
    observer.ended?.(destination.name, outcome, seconds());
  }
}

/** The guard's refusal behind a fetch error (fetch wraps a connector's error as its cause). */
function refusal(error: unknown): OutboundRefusedError | null {
  if (error instanceof OutboundRefusedError) return error;
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof OutboundRefusedError ? cause : null;
}

function describeFetchError(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error as Error).message;
}
