/**
 * `@oncehook/sdk/linear`: Linear's webhook payload types for handlers of `linear` sources.
 * Import it once (`import '@oncehook/sdk/linear';`, types only; needs `@linear/sdk`): a
 * handler's `type` is then `<Linear type>.<action>` as Oncehook stores it (`Issue.create`,
 * `Comment.update`), a type Linear's list does not know does not compile, and the payload is
 * Linear's own payload type for it. Also re-exports the whole SDK.
 */
import type { LinearWebhookEventTypeMap } from '@linear/sdk/webhooks';

export * from './index.js';

/** Linear's entity types (`Issue`, `Comment`, ...). */
export type LinearEntityType = keyof LinearWebhookEventTypeMap & string;

/** The event types Oncehook stores for Linear: `<type>.<action>`. */
export type LinearEventType = `${LinearEntityType}.${string}`;

/** The payload of a Linear event type (`Issue.create` -> Linear's Issue webhook payload). */
export type LinearPayload<T extends string> = T extends `${infer K extends LinearEntityType}.${string}` ? LinearWebhookEventTypeMap[K] : never;

declare module './provider-events.js' {
  interface ProviderEventTypes {
    linear: { [K in LinearEntityType as `${K}.${string}`]: LinearWebhookEventTypeMap[K] };
  }
}
