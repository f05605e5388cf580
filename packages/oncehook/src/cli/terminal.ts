/**
 * What the CLI prints is data from outside (event types, ids, payload excerpts, an API's answer):
 * control characters in it are shown escaped (`\x1b`), never written raw. An event type holding
 * `ESC [` sequences must not clear, recolour or rewrite the operator's terminal; nor may a bidi
 * override reorder what they read. Newlines and tabs of the CLI's own layout stay.
 */

/** C0 controls but tab and newline, DEL, C1 controls, and the Unicode bidi overrides and isolates. */
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

export function terminalSafe(text: string): string {
  // mutant: cli-prints-raw
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** Writes one line (or more) to stdout, made safe. */
export function writeOut(text: string): void {
  process.stdout.write(`${terminalSafe(text)}\n`);
}

/** Writes one line (or more) to stderr, made safe. */
export function writeErr(text: string): void {
  process.stderr.write(`${terminalSafe(text)}\n`);
}
