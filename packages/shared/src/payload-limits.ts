/**
 * Payload limits, checked on every verified body before it is claimed (parseJsonBody), so that
 * what Postgres stores can always be read back, by a worker, the admin and the CLI, at a cost
 * in proportion to what arrived.
 *
 * Why: jsonb keeps numbers exactly, and prints them written out in full. `1e131071` is 8 bytes
 * on the wire and 131,072 digits every time the row is read: 4,200 of them in a 38 KB body,
 * stored in 1.3 KB, printed as 550 MB, killed every worker that leased the run (a string longer
 * than V8 allows) and the ingest serving its admin page. JavaScript reads such a number as
 * Infinity (or 0), so no handler could have used it. Deep nesting is the other shape whose
 * reading costs more than its size: a 5,000-deep array is 10 KB, and a recursive printer
 * (JSON.stringify, indentation) overflows its stack on it or grows quadratically.
 *
 *   MAX_NUMBER_CHARS    a number is at most 64 characters written out in full (as Postgres
 *                       prints it): every id, amount or timestamp fits (a 64-bit integer is
 *                       20), and a JavaScript double is exact to 17 significant digits anyway
 *   MAX_PAYLOAD_DEPTH   at most 128 levels of arrays and objects (serde_json's default; real
 *                       payloads are under 12 deep: GitHub's deepest are about 8)
 *   MAX_PRINTED_RATIO   the payload as Postgres prints it (a space after each `:` and `,`,
 *                       numbers in full) is at most twice its size on the wire, plus 4 KB
 *
 * The scan is one pass over the text, outside strings (whose printed form is never longer
 * than their escaped form on the wire). A body over a limit is refused with 400
 * `payload_limit`, naming the limit, before anything is stored.
 */
import { VerificationError } from './errors.js';

export const MAX_NUMBER_CHARS = 64;
export const MAX_PAYLOAD_DEPTH = 128;
export const MAX_PRINTED_RATIO = 2;
const PRINTED_SLACK_BYTES = 4096;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;
const MINUS = 0x2d;
const DOT = 0x2e;
const PLUS = 0x2b;

const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function payloadLimit(message: string): VerificationError {
  return new VerificationError(400, 'payload_limit', `${message} (payload limits: docs/security.md, "Payload limits")`);
}

/**
 * The length of a JSON number token as Postgres prints it (numeric, written out in full: no
 * exponent). `text.slice(start, end)` is the token, already known to be valid JSON.
 */
export function printedNumberLength(text: string, start: number, end: number): number {
  let i = start;
  const negative = text.charCodeAt(i) === MINUS;
  if (negative) i += 1;
  let intDigits = 0;
  while (i < end && isDigit(text.charCodeAt(i))) {
    intDigits += 1;
    i += 1;
  }
  let fracDigits = 0;
  if (i < end && text.charCodeAt(i) === DOT) {
    i += 1;
    while (i < end && isDigit(text.charCodeAt(i))) {
      fracDigits += 1;
      i += 1;
    }
  }
  let exponent = 0;
  if (i < end) {
    // e, E, then an optional sign and digits. Digits beyond 9 already mean "far too long".
    i += 1;
    const sign = text.charCodeAt(i) === MINUS ? -1 : 1;
    if (text.charCodeAt(i) === MINUS || text.charCodeAt(i) === PLUS) i += 1;
    const digits = text.slice(i, end).replace(/^0+/, '');
    exponent = digits.length > 9 ? sign * 1e9 : sign * Number(digits || '0');
  }
  const integerPart = Math.max(1, intDigits + exponent);
  const fractionPart = Math.max(0, fracDigits - exponent);
  return (negative ? 1 : 0) + integerPart + (fractionPart > 0 ? 1 + fractionPart : 0);
}

/**
 * Checks a verified body's JSON text (already known to parse) against the payload limits;
 * throws VerificationError(400, 'payload_limit') naming the first limit it breaks.
 */
export function checkPayloadLimits(text: string): void {
  const length = text.length;
  let depth = 0;
  // What Postgres prints beyond the text's own length: numbers written out, separators' spaces,
  // minus the whitespace it drops.
  let printedExtra = 0;
  let i = 0;
  while (i < length) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // Skip the string: to the next quote not escaped by a backslash.
      i += 1;
      for (;;) {
        const next = text.indexOf('"', i);
        if (next < 0) return; // unreachable for text that parsed
        let backslashes = 0;
        for (let j = next - 1; j >= i && text.charCodeAt(j) === BACKSLASH; j -= 1) backslashes += 1;
        i = next + 1;
        if (backslashes % 2 === 0) break;
      }
      continue;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      depth += 1;
      // mutant: payload-depth-limit-off
      if (depth > MAX_PAYLOAD_DEPTH) throw payloadLimit(`the payload nests arrays and objects deeper than ${MAX_PAYLOAD_DEPTH} levels`);
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) {
      depth -= 1;
    } else if (c === COMMA || c === COLON) {
      printedExtra += 1;
    } else if (isSpace(c)) {
      printedExtra -= 1;
    } else if (c === MINUS || isDigit(c)) {
      let end = i + 1;
      while (end < length) {
        const d = text.charCodeAt(end);
        if (!(isDigit(d) || d === DOT || d === 0x65 || d === 0x45 || d === PLUS || d === MINUS)) break;
        end += 1;
      }
      const printed = printedNumberLength(text, i, end);
      // mutant: payload-number-limit-off
      if (printed > MAX_NUMBER_CHARS) {
        const token = text.slice(i, Math.min(end, i + 24));
        throw payloadLimit(
          `the payload holds a number (${token}${end - i > 24 ? '...' : ''}) that is ${printed > 1e8 ? 'more than 100,000,000' : printed.toLocaleString('en-US')} characters written out in full; numbers are limited to ${MAX_NUMBER_CHARS}`,
        );
      }
      printedExtra += printed - (end - i);
      i = end;
      continue;
    }
    i += 1;
  }
  const printed = length + printedExtra;
  if (printed > MAX_PRINTED_RATIO * length + PRINTED_SLACK_BYTES) {
    throw payloadLimit(`the payload would be ${printed} characters as stored and printed, more than ${MAX_PRINTED_RATIO} times its ${length} on the wire`);
  }
}
