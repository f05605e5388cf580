/**
 * Builds the configured sources (provider name -> WebhookSource) from config.
 */
import type { IngestConfig } from '../config';
import { ConfigError } from '../config';
import { createStripeSource } from './stripe';
import type { WebhookSource } from './types';

function splitSecrets(value: string): string[] {
  return value
    .split(',')
    .map((secret) => secret.trim())
    .filter(Boolean);
}

export function sourcesFromConfig(config: IngestConfig): Map<string, WebhookSource> {
  const sources = new Map<string, WebhookSource>();
  if (config.STRIPE_WEBHOOK_SECRET) {
    sources.set(
      'stripe',
      createStripeSource({ secrets: splitSecrets(config.STRIPE_WEBHOOK_SECRET), toleranceSeconds: config.STRIPE_TOLERANCE_SECONDS }),
    );
  }
  if (sources.size === 0) {
    throw new ConfigError('No webhook source is configured: set STRIPE_WEBHOOK_SECRET (see README "Configuration").');
  }
  return sources;
}
