/**
 * The example shop, as a handler module: `ONCEHOOK_HANDLERS=examples/shop`. A worker without
 * it never loads any of this; its tables come from its own migrations
 * (`npm run migrate -- --set shop --dir examples/shop/migrations`).
 *
 * | Handler                 | Event                                   | Steps |
 * |-------------------------|-----------------------------------------|-------|
 * | shop.payments           | Stripe payment_intent.succeeded         | top-up: credit-ledger (final); order: record-payment -> send-receipt -> request-shipment -> record-fulfilment (final) |
 * | shop.shopify-orders     | Shopify orders/create                   | charge -> record-order -> send-receipt -> request-shipment -> record-fulfilment (final) |
 * | shop.renewals           | Standard Webhooks subscription.renewed  | charge -> record-renewal (final) |
 * | shop.customer-profiles  | Stripe customer.updated                 | apply-profile (final; stale updates ignored) |
 */
import { createShopClients, shopSettings } from './src/clients.js';
import { shopHandlers } from './src/handlers.js';

export default shopHandlers(createShopClients(shopSettings()));
