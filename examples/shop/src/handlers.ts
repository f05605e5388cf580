/** The shop's handlers over given clients (index.ts builds the clients from the environment; tests from their sandbox). */
import { fileURLToPath } from 'node:url';
import type { ShopClients } from './clients.js';
import { customerProfileHandler } from './customers.js';
import { paymentHandler } from './payments.js';
import { renewalHandler } from './renewals.js';
import { shopifyOrderHandler } from './shopify-orders.js';

export function shopHandlers(clients: ShopClients) {
  return [paymentHandler(clients), shopifyOrderHandler(clients), renewalHandler(clients), customerProfileHandler];
}

/** The shop's migration set: `{ name: 'shop', dir: SHOP_MIGRATIONS }`. */
export const SHOP_MIGRATIONS = fileURLToPath(new URL('../migrations/', import.meta.url));
