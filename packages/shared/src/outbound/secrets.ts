/**
 * Secrets in outbound calls (configured header values, API keys): checked once at configuration
 * so a call can never fail on one, and scrubbed from any text that could still quote one.
 */

/**
 * What is wrong with a header value, without quoting it (the message names the field, never the
 * value): a line break or another control character (it would end the header and start another,
 * or make the client's error quote the value), or a character a header cannot carry.
 */
export function headerValueProblem(value: string): string | null {
  // mutant: header-crlf-accepted
  if (/[\r\n]/.test(value)) return 'contains a line break (CR or LF); a header value is one line';
  if (/[\0-\x08\x0a-\x1f\x7f]/.test(value)) return 'contains a control character';
  if (/[^\x00-\xff]/.test(value)) return 'contains a character outside Latin-1, which a header cannot carry (encode it, e.g. base64)';
  if (value !== value.trim()) return 'starts or ends with white space, which HTTP drops';
  return null;
}

/** Shortest secret scrubbed: shorter values (a "1" header) would scrub ordinary words. */
const MIN_SECRET_LENGTH = 6;

/**
 * The text with every secret, raw, base64 or URL-encoded, replaced by `[redacted]`: for errors
 * that may quote what was sent (a client library's message, an answer that echoes a header).
 */
export function redactSecrets(text: string, secrets: Iterable<string>): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < MIN_SECRET_LENGTH) continue;
    for (const form of new Set([secret, Buffer.from(secret).toString('base64'), encodeURIComponent(secret)])) out = out.split(form).join('[redacted]');
  }
  return out;
}
