/**
 * The example domain, wired: what a user's handlers look like (docs/handlers.md).
 */
import type { EffectClients } from '@oncehook/shared';
import type { HandlerRegistry } from '../handlers';
import { registerCustomerHandlers } from './customers';
import { registerPaymentHandlers } from './payments';
import { registerRenewalHandlers } from './renewals';
import { registerShopifyOrderHandlers } from './shopify-orders';

export function registerExampleHandlers(registry: HandlerRegistry, clients: EffectClients): HandlerRegistry {
  registerPaymentHandlers(registry, clients);
  registerShopifyOrderHandlers(registry, clients);
  registerRenewalHandlers(registry, clients);
  registerCustomerHandlers(registry);
  return registry;
}
