/**
 * The event search, parsed in one place for the admin's events page (its URL), the admin API
 * (`GET /admin/api/events`, `POST /admin/api/redrive`) and the CLI (`oncehook list`,
 * `redrive-all`): the same names, the same checks, the same messages. A bad value is refused
 * with what to write instead, before any query runs.
 *
 *   state        received | processing | done | failed
 *   waiting      paused | concurrency | rate-limit (a run held back by flow control)
 *   source       the source (provider) name; `provider` is the same
 *   type         the event type, exactly
 *   handler      a handler (or destination) with a run for the event; `destination` is the same
 *   event_id     the provider's event id, exactly as stored
 *   since/until  received at or after / before: ISO 8601 (`2026-12-02T02:51Z`; no zone = UTC)
 *                or a time ago (`90`, `30m`, `2h`, `3d`)
 *   older_than   received at least this long ago (`30m`, `2h`, `3d`, or seconds)
 *   payload      `data.object.currency=usd` (the field's text is the value), `customer.email~acme`
 *                (contains, any case), `~refund` (anywhere in the payload)
 *   group        a failure group's id (12 hex digits)
 *   before       a row id: the page after the one that ended at it
 *   limit        rows per page
 */
import type { EventFilter, EventState, RunWaiting } from '@oncehook/core';
import { EVENT_STATES } from '@oncehook/core';

/** The search's fields, as the URL, the API and the CLI (with dashes: `--event-id`) name them. */
export const SEARCH_FIELDS = [
  'state',
  'waiting',
  'source',
  'provider',
  'type',
  'handler',
  'destination',
  'event_id',
  'since',
  'until',
  'older_than',
  'payload',
  'group',
  'before',
  'limit',
] as const;
export type SearchField = (typeof SEARCH_FIELDS)[number];
export type SearchInput = Partial<Record<SearchField, string>>;

export type SearchParse = { ok: true; filter: EventFilter } | { ok: false; field: string; message: string };

const WAITING: RunWaiting[] = ['paused', 'concurrency', 'rate-limit'];
const TEN_YEARS_S = 10 * 365 * 86_400;
const NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const PATH_KEY = /^[A-Za-z0-9_-]{1,64}$/;

class Refusal {
  constructor(
    readonly field: string,
    readonly message: string,
  ) {}
}

/** "90" (seconds), "30m", "2h", "3d" -> seconds; null when it is not one. */
export function durationSeconds(value: string): number | null {
  const match = /^(\d{1,9})([smhd]?)$/.exec(value.trim());
  if (!match) return null;
  const seconds = Number(match[1]) * { '': 1, s: 1, m: 60, h: 3600, d: 86_400 }[match[2] as '' | 's' | 'm' | 'h' | 'd'];
  return seconds <= TEN_YEARS_S ? seconds : null;
}

/** A time (2026-12-02T02:51Z; no zone = UTC) or a time ago (30m, 2h, 3d) -> the instant; null when it is neither. */
export function parseInstant(value: string, now: Date): Date | null {
  const ago = durationSeconds(value);
  if (ago !== null) return new Date(now.getTime() - ago * 1000);
  const iso = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)(Z|[+-]\d{2}:?\d{2})?)?$/.exec(value.trim());
  const at = iso ? new Date(`${iso[1]}T${iso[2] ?? '00:00'}${iso[3] ?? 'Z'}`) : null;
  return at && !Number.isNaN(at.getTime()) ? at : null;
}

function instant(field: SearchField, value: string, now: Date): Date {
  const at = parseInstant(value, now);
  if (!at) throw new Refusal(field, `"${value.slice(0, 40)}" is neither a time (2026-12-02T02:51Z; no zone = UTC) nor a time ago (30m, 2h, 3d)`);
  return at;
}

function name(field: string, value: string, what: string): string {
  if (!NAME.test(value)) throw new Refusal(field, `"${value.slice(0, 40)}" is not a ${what} name (1-63 characters of a-z 0-9 . _ -)`);
  return value;
}

function text(field: SearchField, value: string, max: number): string {
  if (value.length === 0 || value.length > max || /[\0-\x1f]/.test(value)) throw new Refusal(field, `1 to ${max} characters, no control characters`);
  return value;
}

/** `a.b.c=value` (equals), `a.b~value` (contains, any case), `~value` (anywhere in the payload). */
function payloadMatch(value: string): EventFilter['payload'] {
  const match = /^([^=~]*)(=|~)([\s\S]*)$/.exec(value);
  const problem = (why: string) => new Refusal('payload', `${why}: write field.path=value (equals), field.path~text (contains) or ~text (anywhere in the payload)`);
  if (!match) throw problem(`"${value.slice(0, 40)}" has no = or ~`);
  const [, rawPath, op, wanted] = match as unknown as [string, string, '=' | '~', string];
  if (wanted.length === 0 || wanted.length > 500 || wanted.includes('\0')) throw problem('the value is 1 to 500 characters');
  const path = rawPath === '' ? [] : rawPath.split('.');
  if (path.length === 0 && op === '=') throw problem('equals needs a field path');
  if (path.length > 16 || !path.every((key) => PATH_KEY.test(key)))
    throw problem(`"${rawPath.slice(0, 60)}" is not a field path (keys of A-Z a-z 0-9 _ - joined by dots, at most 16)`);
  return { path, op: op === '=' ? 'equals' : 'contains', value: wanted };
}

function positive(field: SearchField, value: string, max: number): number {
  if (!/^\d{1,16}$/.test(value) || Number(value) < 1 || Number(value) > max) throw new Refusal(field, `a whole number from 1 to ${max} (got "${value.slice(0, 20)}")`);
  return Number(value);
}

function one(input: SearchInput, a: SearchField, b: SearchField): [SearchField, string] | undefined {
  if (input[a] !== undefined && input[b] !== undefined) throw new Refusal(b, `${a} and ${b} name the same thing: give one`);
  if (input[a] !== undefined) return [a, input[a]];
  return input[b] === undefined ? undefined : [b, input[b]];
}

/**
 * Reads a search. Unknown fields are refused too (a typo'd filter must not silently list
 * everything); an empty value is no condition (a form's empty box).
 */
export function parseEventSearch(raw: Record<string, string | undefined>, options: { maxLimit: number; now?: Date }): SearchParse {
  const now = options.now ?? new Date();
  try {
    const input: SearchInput = {};
    for (const [key, value] of Object.entries(raw)) {
      if (!(SEARCH_FIELDS as readonly string[]).includes(key)) throw new Refusal(key.slice(0, 40), `unknown filter (the filters: ${SEARCH_FIELDS.join(', ')})`);
      if (value !== undefined && value !== '') input[key as SearchField] = value;
    }
    const filter: EventFilter = {};
    if (input.state !== undefined) {
      if (!EVENT_STATES.includes(input.state as EventState)) throw new Refusal('state', `one of ${EVENT_STATES.join(', ')} (got "${input.state.slice(0, 20)}")`);
      filter.state = input.state as EventState;
    }
    if (input.waiting !== undefined) {
      if (!WAITING.includes(input.waiting as RunWaiting)) throw new Refusal('waiting', `one of ${WAITING.join(', ')} (got "${input.waiting.slice(0, 20)}")`);
      filter.waiting = input.waiting as RunWaiting;
    }
    const source = one(input, 'source', 'provider');
    if (source) filter.source = name(source[0], source[1], 'source');
    const handler = one(input, 'handler', 'destination');
    if (handler) filter.handler = name(handler[0], handler[1], handler[0]);
    if (input.type !== undefined) filter.type = text('type', input.type, 255);
    if (input.event_id !== undefined) filter.eventId = text('event_id', input.event_id, 255);
    if (input.since !== undefined) filter.since = instant('since', input.since, now);
    if (input.until !== undefined) filter.until = instant('until', input.until, now);
    if (filter.since && filter.until && filter.since >= filter.until) throw new Refusal('until', 'until must be later than since');
    if (input.older_than !== undefined) {
      const seconds = durationSeconds(input.older_than);
      if (seconds === null) throw new Refusal('older_than', `"${input.older_than.slice(0, 20)}" is not a duration (90, 30m, 2h, 3d; at most 10 years)`);
      filter.olderThanSeconds = seconds;
    }
    if (input.payload !== undefined) filter.payload = payloadMatch(input.payload);
    // A payload search reads the payload of every event the other filters leave: without a
    // window it reads them all (every stored event, on a busy database millions).
    // mutant: payload-search-unbounded
    if (filter.payload && !filter.since)
      throw new Refusal('payload', 'a payload search needs a time range: add since (24h, 7d, or a time such as 2026-12-02T02:51Z), so it reads only that window');
    if (input.group !== undefined) {
      if (!/^[0-9a-f]{12}$/.test(input.group)) throw new Refusal('group', `a failure group id is 12 hex digits (got "${input.group.slice(0, 20)}")`);
      filter.group = input.group;
    }
    if (input.before !== undefined) filter.before = positive('before', input.before, Number.MAX_SAFE_INTEGER);
    if (input.limit !== undefined) filter.limit = positive('limit', input.limit, options.maxLimit);
    return { ok: true, filter };
  } catch (error) {
    if (error instanceof Refusal) return { ok: false, field: error.field, message: `${error.field}: ${error.message}` };
    throw error;
  }
}

/** The search as URL query parameters (the events page's links: the next page, a group's events). */
export function searchQuery(input: SearchInput): string {
  const params = new URLSearchParams();
  for (const field of SEARCH_FIELDS) if (input[field] !== undefined && input[field] !== '') params.set(field, input[field]);
  return params.toString();
}
