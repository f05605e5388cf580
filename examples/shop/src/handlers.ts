/** The shop's handlers over given clients (index.ts builds the clients from the environment; tests from their sandbox). */
import { fileURLToPath } from 'node:url';
import type { ShopClients } from './clients';
import { customerProfileHandler } from './customers';
import { paymentHandler } from './payments';
import { renewalHandler } from './renewals';
import { shopifyOrderHandler } from './shopify-orders';

export function shopHandlers(clients: ShopClients) {
  return [paymentHandler(clients), shopifyOrderHandler(clients), renewalHandler(clients), customerProfileHandler];
}

/** The shop's migration set: `{ name: 'shop', dir: SHOP_MIGRATIONS }`. */
export const SHOP_MIGRATIONS = fileURLToPath(new URL('../migrations/', import.meta.url));
