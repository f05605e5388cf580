/**
 * How operators see a stored payload (the admin's event page and API, `oncehook show`): always
 * bounded, whatever is stored. Payloads claimed since the payload limits (payload-limits.ts)
 * are at most 128 levels deep and a few MB printed; payloads stored before them can be
 * anything jsonb holds, e.g. 5,000 nested arrays, on which a recursive printer (JSON.stringify)
 * overflows its stack and indentation grows quadratically (10 x 2,000-deep: an 80 MB page).
 *
 * The printer here is iterative (no recursion, so no stack to overflow), indents only the first
 * INDENT_DEPTH levels (deeper levels are printed compact), replaces what is deeper than
 * MAX_PAYLOAD_DEPTH by `[...]`/`{...}`, and stops at MAX_VIEW_CHARS with a note saying so.
 */
import { MAX_PAYLOAD_DEPTH } from '@oncehook/shared';

/** Most characters of a payload an operator's view prints (the rest is cut, with a note). */
export const MAX_VIEW_CHARS = 256 * 1024;
/** Levels indented in the pretty view; deeper ones are printed compact. */
const INDENT_DEPTH = 16;

export interface PayloadView {
  /** The payload printed (pretty, bounded). */
  text: string;
  /** True when `text` is not the whole payload (cut at MAX_VIEW_CHARS, or levels elided). */
  truncated: boolean;
  /**
   * The payload itself when it is shallow enough to hand to JSON.stringify (at most
   * MAX_PAYLOAD_DEPTH levels: an API answer), else undefined (use `text`).
   */
  value: unknown;
}

/** True when `value` nests at most `limit` levels (iterative: any depth is safe to check). */
export function nestsAtMost(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    if (depth >= limit) return false;
    for (const child of Array.isArray(node) ? node : Object.values(node as Record<string, unknown>)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
    }
  }
  return true;
}

type Frame = { kind: 'array'; items: unknown[]; i: number; depth: number } | { kind: 'object'; entries: [string, unknown][]; i: number; depth: number };

/** Prints `payload` within the bounds above; see PayloadView. */
export function viewPayload(payload: unknown, maxChars = MAX_VIEW_CHARS): PayloadView {
  const out: string[] = [];
  let length = 0;
  let truncated = false;
  const emit = (s: string) => {
    out.push(s);
    length += s.length;
  };
  const newline = (depth: number) => (depth <= INDENT_DEPTH ? `\n${'  '.repeat(depth)}` : '');

  /** Opens a container (or prints a scalar) at `depth`; returns the frame to continue with. */
  const open = (value: unknown, depth: number): Frame | null => {
    if (Array.isArray(value)) {
      if (depth >= MAX_PAYLOAD_DEPTH) {
        emit('[...]');
        truncated = true;
        return null;
      }
      emit('[');
      return { kind: 'array', items: value, i: 0, depth: depth + 1 };
    }
    if (value !== null && typeof value === 'object') {
      if (depth >= MAX_PAYLOAD_DEPTH) {
        emit('{...}');
        truncated = true;
        return null;
      }
      emit('{');
      return { kind: 'object', entries: Object.entries(value as Record<string, unknown>), i: 0, depth: depth + 1 };
    }
    emit(JSON.stringify(value) ?? 'null');
    return null;
  };

  const stack: Frame[] = [];
  const first = open(payload, 0);
  if (first) stack.push(first);
  while (stack.length > 0) {
    if (length > maxChars) {
      truncated = true;
      break;
    }
    const frame = stack[stack.length - 1]!;
    const count = frame.kind === 'array' ? frame.items.length : frame.entries.length;
    if (frame.i >= count) {
      stack.pop();
      if (count > 0) emit(newline(frame.depth - 1));
      emit(frame.kind === 'array' ? ']' : '}');
      continue;
    }
    if (frame.i > 0) emit(',');
    emit(newline(frame.depth));
    let value: unknown;
    if (frame.kind === 'array') value = frame.items[frame.i];
    else {
      const [key, v] = frame.entries[frame.i]!;
      emit(`${JSON.stringify(key)}: `);
      value = v;
    }
    frame.i += 1;
    const child = open(value, frame.depth);
    if (child) stack.push(child);
  }
  let text = out.join('');
  if (text.length > maxChars) text = text.slice(0, maxChars);
  if (truncated) text += `\n... (cut: payloads are shown up to ${maxChars.toLocaleString('en-US')} characters and ${MAX_PAYLOAD_DEPTH} levels)`;
  return { text, truncated, value: nestsAtMost(payload, MAX_PAYLOAD_DEPTH) ? payload : undefined };
}
