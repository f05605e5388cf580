/**
 * Realistic payloads of the adapters' events people test with first, shaped as each provider
 * sends them (ids and times fresh on every call); each adapter's descriptor points at its map,
 * and `fixture()` (fixtures.ts) finds them through the provider list. `oncehook send` delivers
 * them; handler tests can use them too:
 *
 *   const payload = fixture('stripe', 'payment_intent.succeeded');
 *   const delivery = signedDelivery('stripe', payload, secret);
 *
 * `stripe` `payment_intent.succeeded` is what `stripe trigger payment_intent.succeeded` sends:
 * a $20.00 card payment "(created by Stripe CLI)" with NO customer and no metadata.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { PayloadBuilder as Builder } from '../descriptor.js';

const now = () => Math.floor(Date.now() / 1000);
const token = (n = 24) => randomBytes(n).toString('base64url').replace(/[-_]/g, 'x').slice(0, n);

function stripeEvent(type: string, object: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: `evt_${token()}`,
    object: 'event',
    api_version: '2024-06-20',
    created: now(),
    data: { object, ...extra },
    livemode: false,
    pending_webhooks: 1,
    request: { id: `req_${token(14)}`, idempotency_key: randomUUID() },
    type,
  };
}

export const STRIPE_PAYLOADS: Readonly<Record<string, Builder>> = {
  'payment_intent.succeeded': () => {
    const id = `pi_${token()}`;
    return stripeEvent('payment_intent.succeeded', {
      id,
      object: 'payment_intent',
      amount: 2000,
      amount_capturable: 0,
      amount_details: { tip: {} },
      amount_received: 2000,
      application: null,
      application_fee_amount: null,
      automatic_payment_methods: null,
      canceled_at: null,
      cancellation_reason: null,
      capture_method: 'automatic',
      client_secret: `${id}_secret_${token()}`,
      confirmation_method: 'automatic',
      created: now(),
      currency: 'usd',
      customer: null,
      description: '(created by Stripe CLI)',
      invoice: null,
      last_payment_error: null,
      latest_charge: `ch_${token()}`,
      livemode: false,
      metadata: {},
      next_action: null,
      on_behalf_of: null,
      payment_method: `pm_${token()}`,
      payment_method_options: { card: { installments: null, mandate_options: null, network: null, request_three_d_secure: 'automatic' } },
      payment_method_types: ['card'],
      processing: null,
      receipt_email: null,
      review: null,
      setup_future_usage: null,
      shipping: {
        address: { city: 'San Francisco', country: 'US', line1: '510 Townsend St', line2: null, postal_code: '94103', state: 'CA' },
        carrier: null,
        name: 'Jenny Rosen',
        phone: null,
        tracking_number: null,
      },
      source: null,
      statement_descriptor: null,
      statement_descriptor_suffix: null,
      status: 'succeeded',
      transfer_data: null,
      transfer_group: null,
    });
  },
  'customer.updated': () =>
    stripeEvent(
      'customer.updated',
      {
        id: `cus_${token(14)}`,
        object: 'customer',
        address: null,
        balance: 0,
        created: now() - 86_400,
        currency: null,
        default_source: null,
        delinquent: false,
        description: '(created by Stripe CLI)',
        email: 'jenny.rosen@example.com',
        invoice_prefix: token(8).toUpperCase(),
        livemode: false,
        metadata: {},
        name: 'Jenny Rosen',
        phone: null,
        preferred_locales: [],
        shipping: null,
        tax_exempt: 'none',
      },
      { previous_attributes: { email: 'jenny@example.com' } },
    ),
  'charge.refunded': () =>
    stripeEvent('charge.refunded', {
      id: `ch_${token()}`,
      object: 'charge',
      amount: 2000,
      amount_captured: 2000,
      amount_refunded: 2000,
      billing_details: { address: { city: null, country: null, line1: null, line2: null, postal_code: null, state: null }, email: null, name: null, phone: null },
      currency: 'usd',
      customer: null,
      description: '(created by Stripe CLI)',
      metadata: {},
      paid: true,
      payment_intent: `pi_${token()}`,
      refunded: true,
      status: 'succeeded',
    }),
  'invoice.paid': () =>
    stripeEvent('invoice.paid', {
      id: `in_${token()}`,
      object: 'invoice',
      amount_due: 2000,
      amount_paid: 2000,
      amount_remaining: 0,
      currency: 'usd',
      customer: `cus_${token(14)}`,
      customer_email: 'jenny.rosen@example.com',
      paid: true,
      status: 'paid',
      subscription: `sub_${token()}`,
    }),
};

const repository = { id: 1296269, name: 'hello-world', full_name: 'octocat/hello-world', private: false, html_url: 'https://github.com/octocat/hello-world' };
const sender = { login: 'octocat', id: 1, type: 'User' };

export const GITHUB_PAYLOADS: Readonly<Record<string, Builder>> = {
  'issues.opened': () => {
    const number = 1 + Math.floor(Math.random() * 10_000);
    return {
      action: 'opened',
      issue: {
        id: Math.floor(Math.random() * 1e9),
        number,
        title: 'Found a bug',
        body: "I'm having a problem with this.",
        state: 'open',
        user: sender,
        labels: [],
        html_url: `https://github.com/octocat/hello-world/issues/${number}`,
        created_at: new Date().toISOString(),
      },
      repository,
      sender,
    };
  },
  push: () => {
    const after = randomBytes(20).toString('hex');
    const commit = {
      id: after,
      message: 'Fix the bug',
      timestamp: new Date().toISOString(),
      author: { name: 'Monalisa Octocat', email: 'mona@example.com' },
      added: [],
      removed: [],
      modified: ['README.md'],
    };
    return {
      ref: 'refs/heads/main',
      before: randomBytes(20).toString('hex'),
      after,
      created: false,
      deleted: false,
      forced: false,
      commits: [commit],
      head_commit: commit,
      repository,
      pusher: { name: 'octocat', email: 'octocat@example.com' },
      sender,
    };
  },
  'pull_request.opened': () => {
    const number = 1 + Math.floor(Math.random() * 10_000);
    return {
      action: 'opened',
      number,
      pull_request: {
        id: Math.floor(Math.random() * 1e9),
        number,
        title: 'Amazing new feature',
        state: 'open',
        user: sender,
        head: { ref: 'feature' },
        base: { ref: 'main' },
        merged: false,
      },
      repository,
      sender,
    };
  },
  ping: () => ({ zen: 'Design for failure.', hook_id: 424242, hook: { type: 'Repository', id: 424242, active: true, events: ['push', 'issues'] }, repository, sender }),
};

function shopifyOrder(): Record<string, unknown> {
  const id = 5_000_000_000_000 + Math.floor(Math.random() * 1e9);
  return {
    id,
    admin_graphql_api_id: `gid://shopify/Order/${id}`,
    email: 'bob.norman@example.com',
    created_at: new Date().toISOString(),
    currency: 'USD',
    financial_status: 'paid',
    name: `#${1000 + Math.floor(Math.random() * 9000)}`,
    total_price: '59.00',
    subtotal_price: '49.00',
    total_tax: '0.00',
    customer: { id: 6_000_000_000_000 + Math.floor(Math.random() * 1e9), email: 'bob.norman@example.com', first_name: 'Bob', last_name: 'Norman' },
    line_items: [{ id: 7_000_000_000_000 + Math.floor(Math.random() * 1e9), sku: 'IPOD2008PINK', title: 'IPod Nano - 8GB', quantity: 1, price: '49.00' }],
    shipping_address: { first_name: 'Bob', last_name: 'Norman', address1: 'Chestnut Street 92', city: 'Louisville', province: 'Kentucky', country: 'United States', zip: '40202' },
    shipping_lines: [{ title: 'Standard', price: '10.00' }],
  };
}

export const SHOPIFY_PAYLOADS: Readonly<Record<string, Builder>> = {
  'orders/create': shopifyOrder,
  'orders/paid': shopifyOrder,
  'orders/updated': shopifyOrder,
};

export const STANDARD_PAYLOADS: Readonly<Record<string, Builder>> = {
  'subscription.renewed': () => ({
    type: 'subscription.renewed',
    timestamp: new Date().toISOString(),
    data: { subscription_id: `sub_${token(14)}`, customer_id: `cus_${token(14)}`, amount: 2000, currency: 'usd', period_end: new Date(Date.now() + 30 * 86_400_000).toISOString() },
  }),
  'user.created': () => ({
    type: 'user.created',
    timestamp: new Date().toISOString(),
    data: { id: `user_${token(20)}`, email_addresses: [{ email_address: 'jenny.rosen@example.com' }], first_name: 'Jenny' },
  }),
};

export const SLACK_PAYLOADS: Readonly<Record<string, Builder>> = {
  app_mention: () => ({
    token: token(24),
    team_id: 'T0001',
    api_app_id: 'A0001',
    type: 'event_callback',
    event_id: `Ev${token(10).toUpperCase()}`,
    event_time: now(),
    event: {
      type: 'app_mention',
      user: 'U0001',
      text: '<@U0LAN0Z89> is it everything a river should be?',
      ts: `${now()}.000200`,
      channel: 'C0LAN2Q65',
      event_ts: `${now()}.000200`,
    },
  }),
};

export const PADDLE_PAYLOADS: Readonly<Record<string, Builder>> = {
  'transaction.completed': () => ({
    event_type: 'transaction.completed',
    data: { id: `txn_${token(26)}`, status: 'completed', customer_id: `ctm_${token(26)}`, currency_code: 'USD', details: { totals: { total: '2000', currency_code: 'USD' } } },
  }),
  'subscription.renewed': () => ({
    event_type: 'subscription.renewed',
    data: { id: `sub_${token(26)}`, status: 'active', customer_id: `ctm_${token(26)}`, currency_code: 'USD' },
  }),
};
