/**
 * Deliveries signed the way each provider signs them, for a handler author's tests (and
 * `npm run send`). Our own test suite checks these against the providers' official SDKs.
 *
 *   const delivery = signedDelivery('stripe', { type: 'charge.refunded', data: { object: charge } }, secret);
 *   await fetch(`${ingestUrl}/webhooks/stripe`, { method: 'POST', body: delivery.body, headers: delivery.headers });
 */
import { createHmac, randomUUID } from 'node:crypto';
import { SENDER_SCHEMES } from '../providers/senders.js';
import type { SenderKind } from '@oncehook/sdk';
import { signSchemeDelivery } from './sign-scheme.js';

/** Every kind a delivery can be signed as: the adapters', `svix` (Standard Webhooks with svix- headers), and every table sender. */
export type DeliveryKind = 'stripe' | 'github' | 'shopify' | 'standard-webhooks' | 'svix' | 'slack' | 'paddle' | 'hmac' | SenderKind;

export interface SignedDeliveryOptions {
  /**
   * The provider's stable event id, where the provider puts it (a header, or the body: it then
   * replaces the payload's own id). Default: the payload's id, else a fresh one. With a JSON
   * string payload (sent byte for byte) a body id cannot be replaced: a different one throws.
   */
  id?: string;
  /**
   * The event type: Stripe/Paddle/Standard Webhooks put it in the body (used when the payload
   * has none); GitHub `event` or `event.action`; Shopify the topic.
   */
  type?: string;
  /** Unix seconds of the signature (default: now). */
  timestamp?: number;
  /** Redelivery number: changes only per-attempt fields (Slack's retry headers). */
  attempt?: number;
  /** GitHub's hook id (default 1). */
  hookId?: string;
  /** Shopify's shop domain (default example.myshopify.com). */
  shopDomain?: string;
  /** The public URL the delivery is posted to, for senders that sign it (HubSpot, Square). */
  url?: string;
  /** Generic HMAC sources: how the source is configured (docs/providers.md). */
  hmac?: {
    signatureHeader: string;
    encoding: 'hex' | 'base64' | 'base64url';
    signaturePrefix?: string;
    timestampHeader?: string;
    idHeader?: string;
    typeHeader?: string;
    /** Headers whose values are signed (after the timestamp, each followed by a dot), in order. */
    signedHeaders?: string[];
  };
}

export interface SignedDelivery {
  body: string;
  headers: Record<string, string>;
  /** The id Oncehook stores for this event (GitHub: `<hook id>:<delivery>`). */
  eventId: string;
}

const now = () => Math.floor(Date.now() / 1000);
const hmac = (key: string | Buffer, ...parts: string[]) => {
  const mac = createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
};

function objectPayload(payload: unknown): Record<string, unknown> {
  if (typeof payload === 'string') return JSON.parse(payload) as Record<string, unknown>;
  return { ...(payload as Record<string, unknown>) };
}

/** Puts `options.id` in the body's `field` (the payload's own id, else a fresh one, when not given). */
function bodyId(object: Record<string, unknown>, field: string, payload: unknown, id: string | undefined, fresh: () => string): void {
  if (id === undefined) {
    object[field] ??= fresh();
    return;
  }
  if (typeof payload === 'string' && object[field] !== undefined && object[field] !== id) {
    throw new Error(`signedDelivery: the payload is sent byte for byte and its ${field} is "${String(object[field])}", not "${id}": change it in the payload, or leave out the id`);
  }
  object[field] = id;
}

/** Signs `payload` (an object, or a JSON string sent byte for byte) as `kind` signs it, with `secret`. */
export function signedDelivery(kind: DeliveryKind, payload: unknown, secret: string, options: SignedDeliveryOptions = {}): SignedDelivery {
  const timestamp = options.timestamp ?? now();
  const json = { 'content-type': 'application/json' };
  switch (kind) {
    case 'stripe': {
      const event: Record<string, unknown> = { object: 'event', created: timestamp, ...objectPayload(payload) };
      bodyId(event, 'id', payload, options.id, () => `evt_${randomUUID().replace(/-/g, '').slice(0, 24)}`);
      if (options.type && event.type === undefined) event.type = options.type;
      const body = typeof payload === 'string' ? payload : JSON.stringify(event);
      return { body, headers: { ...json, 'stripe-signature': `t=${timestamp},v1=${hmac(secret, `${timestamp}.`, body).toString('hex')}` }, eventId: String(event.id) };
    }
    case 'github': {
      const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
      const delivery = options.id ?? randomUUID();
      const hookId = options.hookId ?? '1';
      const event = (options.type ?? 'ping').split('.')[0]!;
      return {
        body,
        headers: {
          ...json,
          'x-github-delivery': delivery,
          'x-github-event': event,
          'x-github-hook-id': hookId,
          'x-hub-signature-256': `sha256=${hmac(secret, body).toString('hex')}`,
        },
        eventId: `${hookId}:${delivery}`,
      };
    }
    case 'shopify': {
      const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
      const id = options.id ?? randomUUID();
      return {
        body,
        headers: {
          ...json,
          'x-shopify-hmac-sha256': hmac(secret, body).toString('base64'),
          'x-shopify-webhook-id': id,
          'x-shopify-topic': options.type ?? 'orders/create',
          'x-shopify-shop-domain': options.shopDomain ?? 'example.myshopify.com',
          'x-shopify-api-version': '2025-01',
          'x-shopify-triggered-at': new Date(timestamp * 1000).toISOString(),
          'x-shopify-event-id': randomUUID(),
        },
        eventId: id,
      };
    }
    case 'standard-webhooks':
    case 'svix': {
      const object = objectPayload(payload);
      if (options.type && object.type === undefined) object.type = options.type;
      const body = typeof payload === 'string' ? payload : JSON.stringify(object);
      const id = options.id ?? `msg_${randomUUID().replace(/-/g, '')}`;
      const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
      const prefix = kind === 'svix' ? 'svix' : 'webhook';
      return {
        body,
        headers: {
          ...json,
          [`${prefix}-id`]: id,
          [`${prefix}-timestamp`]: String(timestamp),
          [`${prefix}-signature`]: `v1,${hmac(key, `${id}.${timestamp}.`, body).toString('base64')}`,
        },
        eventId: id,
      };
    }
    case 'slack': {
      const object = objectPayload(payload);
      const envelope =
        object.type === 'event_callback' || object.type === 'url_verification'
          ? object
          : {
              type: 'event_callback',
              event_id: options.id ?? `Ev${randomUUID().replace(/-/g, '').slice(0, 10).toUpperCase()}`,
              event_time: timestamp,
              event: { type: options.type ?? 'message', ...object },
            };
      if (envelope === object) bodyId(envelope, 'event_id', payload, options.id, () => `Ev${randomUUID().replace(/-/g, '').slice(0, 10).toUpperCase()}`);
      const body = typeof payload === 'string' ? payload : JSON.stringify(envelope);
      const retry: Record<string, string> = options.attempt && options.attempt > 0 ? { 'x-slack-retry-num': String(options.attempt), 'x-slack-retry-reason': 'http_timeout' } : {};
      return {
        body,
        headers: { ...json, 'x-slack-request-timestamp': String(timestamp), 'x-slack-signature': `v0=${hmac(secret, `v0:${timestamp}:`, body).toString('hex')}`, ...retry },
        eventId: String(envelope.event_id ?? ''),
      };
    }
    case 'paddle': {
      const object = objectPayload(payload);
      bodyId(object, 'event_id', payload, options.id, () => `evt_${randomUUID().replace(/-/g, '').slice(0, 26)}`);
      if (options.type && object.event_type === undefined) object.event_type = options.type;
      object.occurred_at ??= new Date(timestamp * 1000).toISOString();
      object.notification_id ??= `ntf_${randomUUID().replace(/-/g, '').slice(0, 26)}`;
      const body = typeof payload === 'string' ? payload : JSON.stringify(object);
      return { body, headers: { ...json, 'paddle-signature': `ts=${timestamp};h1=${hmac(secret, `${timestamp}:`, body).toString('hex')}` }, eventId: String(object.event_id) };
    }
    case 'hmac': {
      const config = options.hmac;
      if (!config) throw new Error("signedDelivery('hmac', ...) needs options.hmac: the source's signatureHeader, encoding, signaturePrefix and timestampHeader");
      const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
      const headers: Record<string, string> = { ...json };
      if (config.timestampHeader) headers[config.timestampHeader.toLowerCase()] = String(timestamp);
      const id = options.id ?? randomUUID();
      if (config.idHeader) headers[config.idHeader.toLowerCase()] = id;
      if (config.typeHeader && options.type) headers[config.typeHeader.toLowerCase()] = options.type;
      const signedValues = (config.signedHeaders ?? []).map((name) => {
        const value = headers[name.toLowerCase()];
        if (value === undefined) throw new Error(`signedDelivery('hmac'): signed header ${name} has no value (set idHeader/typeHeader, or pass it)`);
        return `${value}.`;
      });
      const parts = [...(config.timestampHeader ? [`${timestamp}.`] : []), ...signedValues, body];
      headers[config.signatureHeader.toLowerCase()] = `${config.signaturePrefix ?? ''}${hmac(secret, ...parts).toString(config.encoding)}`;
      return { body, headers, eventId: id };
    }
    default: {
      // A table sender: signed from its scheme (asymmetric senders: `secret` is the private key).
      const { body, headers, eventId } = signSchemeDelivery(SENDER_SCHEMES[kind], payload, secret, options);
      return { body, headers, eventId };
    }
  }
}
