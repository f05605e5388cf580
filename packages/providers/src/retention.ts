import { PROVIDERS } from './providers.js';

/**
 * Retention horizons, two per event: its payload (with its runs, steps and delivery log) is
 * kept RETENTION_DAYS per source, its key (a narrow row) KEY_RETENTION_DAYS.
 *
 * Historically one horizon: how long an event's key is kept, per source. The horizon must exceed
 * the provider's longest redelivery window (docs/providers.md), or a late redelivery would
 * find no key and be processed as new. Ingest refuses deliveries whose signed creation time
 * is already past the horizon (they could be such late redeliveries).
 */
export interface RetentionPolicy {
  /** Payload horizon (RETENTION_DAYS): payload, runs, steps and the delivery log go. */
  defaultDays: number;
  overrides: Record<string, number>;
  /** Key horizon (KEY_RETENTION_DAYS): the narrow row goes; at least every payload horizon. */
  keyDays: number;
}

export function retentionDaysFor(policy: RetentionPolicy, provider: string): number {
  return policy.overrides[provider] ?? policy.defaultDays;
}

/**
 * How long each built-in provider keeps redelivering an event on its own (each descriptor's
 * `redelivery`; docs/providers.md,
 * "what each provider's redelivery repeats"): a key must be kept at least this long, or an
 * automatic redelivery after the key was deleted would be processed as a new event. Manual
 * resends reach further (Stripe's CLI: 30 days; Svix: while the payload is retained): the
 * default RETENTION_DAYS (35) covers Stripe's; docs/operating.md, "Retention", says the rest.
 */
export const REDELIVERY_WINDOWS: Readonly<Record<string, { days: number; what: string }>> = Object.fromEntries(
  PROVIDERS.flatMap((provider) => (provider.redelivery ? [[provider.kind, provider.redelivery]] : [])),
);

/**
 * Refuses a retention shorter than a source's provider redelivers for, naming the source, the
 * provider's window and the variable to change. Sources of a kind without a documented window
 * (generic HMAC) are not checked.
 */
export function retentionProblems(policy: RetentionPolicy, sources: readonly { name: string; kind: string }[]): string[] {
  const problems: string[] = [];
  for (const source of sources) {
    const window = REDELIVERY_WINDOWS[source.kind];
    if (!window) continue;
    const days = retentionDaysFor(policy, source.name);
    if (days < window.days) {
      const setting = source.name in policy.overrides ? `RETENTION_OVERRIDES ${source.name}=${days}` : `RETENTION_DAYS=${days}`;
      problems.push(
        `${setting} keeps the payloads of source "${source.name}" for ${days} day(s), but ${window.what}: keep an event's payload, runs and steps at least while its provider may still redeliver it, at least ${window.days} days (the default is 35).`,
      );
    }
  }
  return problems;
}
