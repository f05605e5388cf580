/**
 * The events of a verified delivery, read from the places the scheme names (scheme-spec.ts):
 * one event, or one per element of a batch, each with its id, type, signed time and the body
 * hash that is its second dedupe key where the signature does not cover the id.
 */
import { VerificationError } from '@oncehook/shared';
import type { VerifiedEvent } from '@oncehook/shared';
import { describe, fieldAt, omit, timeOf, type BatchSpec, type IdSpec, type SenderScheme, type ValueSpec } from './scheme-spec.js';
import { bodyHash, checkEventId, checkEventType, isRecord, type DeliveryRequest } from './types.js';

type Header = DeliveryRequest['header'];

/** What every event of one source carries besides what the delivery says. */
export interface EventOrigin {
  /** The source's name (the provider of its events). */
  name: string;
  meta: Record<string, string>;
  /** Whether the raw body is a second dedupe key (scheme.ts needsBodyDedupe). */
  dedupeOnBody: boolean;
}

function valueAt(spec: ValueSpec, json: unknown, header: Header): unknown {
  if ('value' in spec) return spec.value;
  if ('header' in spec) return header(spec.header);
  if ('firstOf' in spec) {
    for (const part of spec.firstOf) {
      const value = fieldAt(json, part.field);
      if (typeof value === 'string' && value !== '') return `${part.prefix}${value}`;
    }
    return spec.default;
  }
  if ('join' in spec) {
    const parts = spec.join.map((part) => valueAt(part, json, header)).filter((v) => typeof v === 'string' && v !== '');
    return parts.length ? parts.join('.') : undefined;
  }
  const fields = Array.isArray(spec.field) ? spec.field : [spec.field];
  const values = fields.map((field) => fieldAt(json, field)).filter((v) => typeof v === 'string' && v !== '');
  // A compound type (`Issue` + `create`): the parts present, joined with dots.
  return values.length ? values.join('.') : spec.default;
}

function idOf(spec: IdSpec, json: unknown, text: string, header: Header): string {
  if ('bodyHash' in spec) return `sha256:${bodyHash(Buffer.from(text, 'utf8')).toString('hex')}`;
  const raw = 'header' in spec ? header(spec.header) : fieldAt(json, spec.field);
  return checkEventId(typeof raw === 'number' && Number.isSafeInteger(raw) ? String(raw) : raw, describe(spec));
}

function signedAtOf(spec: { field: string; unit: 's' | 'ms' | 'iso' } | undefined, json: unknown): Date | null {
  if (!spec) return null;
  const value = fieldAt(json, spec.field);
  if (value === undefined || value === null) return null;
  const date = timeOf(value, spec.unit);
  if (!date) throw new VerificationError(400, 'malformed_payload', `body field "${spec.field}" must be a time (${spec.unit})`);
  return date;
}

/** A batch delivery's events: every element on its own, keyed by its own id (or hash). */
export function batchEvents(scheme: SenderScheme, batch: BatchSpec, origin: EventOrigin, json: unknown, header: Header): VerifiedEvent[] {
  const items = fieldAt(json, batch.items);
  if (!Array.isArray(items) || items.length === 0) {
    throw new VerificationError(400, 'malformed_payload', `${scheme.title} body must carry a non-empty array${batch.items === '$' ? '' : ` at "${batch.items}"`}`);
  }
  return items.map((item, i): VerifiedEvent => {
    if (!isRecord(item)) throw new VerificationError(400, 'malformed_payload', `${scheme.title} element #${i + 1} is not a JSON object`);
    const itemText = JSON.stringify(item);
    return {
      source: origin.name,
      kind: scheme.kind,
      eventId: idOf(batch.id, item, itemText, header),
      type: checkEventType(valueAt(batch.type, item, header), `element #${i + 1} ${describe(batch.type)}`),
      signedAt: signedAtOf(batch.signedAt, item),
      rawBody: itemText,
      payload: item,
      meta: { ...origin.meta, element: String(i) },
      bodyHash: batch.contentKeyWithout ? bodyHash(Buffer.from(JSON.stringify(omit(item, batch.contentKeyWithout)), 'utf8')) : null,
    };
  });
}

/** A single delivery's event. */
export function singleEvent(scheme: SenderScheme, origin: EventOrigin, body: { text: string; json: unknown }, request: DeliveryRequest): VerifiedEvent {
  const { text, json } = body;
  if (!isRecord(json)) throw new VerificationError(400, 'malformed_payload', `${scheme.title} body must be a JSON object`);
  const idSpec = scheme.id ?? { bodyHash: true };
  const typeSpec = scheme.type ?? { value: 'webhook' };
  const replay = scheme.replayKey === undefined ? null : fieldAt(json, scheme.replayKey);
  return {
    source: origin.name,
    kind: scheme.kind,
    eventId: idOf(idSpec, json, text, request.header),
    type: checkEventType(valueAt(typeSpec, json, request.header), describe(typeSpec)),
    signedAt: signedAtOf(scheme.signedAt, json),
    rawBody: text,
    payload: json,
    meta: origin.meta,
    // A replay key (a per-signature token) dedupes signatures; else the body dedupes bodies.
    bodyHash: replay !== null ? bodyHash(Buffer.from(`replay\0${String(replay)}`, 'utf8')) : origin.dedupeOnBody ? bodyHash(request.rawBody) : null,
  };
}
