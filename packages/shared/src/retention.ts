/**
 * Retention horizons: how long an event's key is kept, per source. The horizon must exceed
 * the provider's longest redelivery window (docs/providers.md), or a late redelivery would
 * find no key and be processed as new. Ingest refuses deliveries whose signed creation time
 * is already past the horizon (they could be such late redeliveries).
 */
export interface RetentionPolicy {
  defaultDays: number;
  overrides: Record<string, number>;
}

export function retentionDaysFor(policy: RetentionPolicy, provider: string): number {
  return policy.overrides[provider] ?? policy.defaultDays;
}
