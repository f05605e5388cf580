/**
 * Payloads of the table senders (@oncehook/shared senders.ts), shaped as each sender's
 * documentation shows them, ids and times fresh on every call. A batch sender's payload is ONE
 * element (the signer wraps it in the array), except Meta's, which is the whole delivery.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { SenderKind } from '@oncehook/sdk';

type Builder = () => Record<string, unknown>;
const now = () => Math.floor(Date.now() / 1000);
const iso = () => new Date().toISOString();
const hex = (n: number) => randomBytes(n).toString('hex');

export const SENDER_FIXTURES: Readonly<Record<SenderKind, Record<string, Builder>>> = {
  linear: {
    'Issue.create': () => ({
      action: 'create',
      type: 'Issue',
      createdAt: iso(),
      organizationId: randomUUID(),
      url: 'https://linear.app/acme/issue/ENG-42/checkout-charges-twice',
      webhookId: randomUUID(),
      data: { id: randomUUID(), identifier: 'ENG-42', title: 'Checkout charges twice', priority: 1, teamId: randomUUID(), createdAt: iso() },
    }),
  },
  intercom: {
    'conversation.user.created': () => ({
      type: 'notification_event',
      app_id: 'abc123',
      id: `notif_${randomUUID()}`,
      topic: 'conversation.user.created',
      delivery_attempts: 1,
      first_sent_at: now(),
      created_at: now(),
      data: { type: 'notification_event_data', item: { type: 'conversation', id: String(Date.now()), state: 'open' } },
    }),
  },
  hubspot: {
    'contact.creation': () => ({
      eventId: Math.floor(Math.random() * 2 ** 31),
      subscriptionId: 4711,
      portalId: 62515,
      appId: 1160452,
      occurredAt: Date.now(),
      subscriptionType: 'contact.creation',
      attemptNumber: 0,
      objectId: Math.floor(Math.random() * 2 ** 31),
      changeSource: 'CRM',
    }),
  },
  square: {
    'payment.created': () => ({
      merchant_id: 'ML8M1AQ1GQG2K',
      type: 'payment.created',
      event_id: randomUUID(),
      created_at: iso(),
      data: { type: 'payment', id: `KkAkhdMs${hex(8)}`, object: { payment: { id: `KkAkhdMs${hex(8)}`, amount_money: { amount: 2000, currency: 'USD' }, status: 'APPROVED' } } },
    }),
  },
  sendgrid: {
    delivered: () => ({
      email: 'jenny@example.com',
      timestamp: now(),
      'smtp-id': `<${hex(8)}@ismtpd0001p1lon1.sendgrid.net>`,
      event: 'delivered',
      category: ['receipt'],
      sg_event_id: `${hex(11)}`,
      sg_message_id: `${hex(11)}.filter0001p1las1`,
      response: '250 OK',
    }),
  },
  mailgun: {
    delivered: () => ({
      'event-data': {
        id: hex(11),
        event: 'delivered',
        timestamp: now(),
        recipient: 'jenny@example.com',
        message: { headers: { 'message-id': `${hex(8)}@mg.example.com`, subject: 'Your receipt' } },
        'delivery-status': { code: 250, message: 'OK' },
      },
    }),
  },
  postmark: {
    Delivery: () => ({
      RecordType: 'Delivery',
      ServerID: 23,
      MessageStream: 'outbound',
      MessageID: randomUUID(),
      Recipient: 'jenny@example.com',
      Tag: 'receipt',
      DeliveredAt: iso(),
      Details: 'Test delivery webhook details',
    }),
  },
  gitlab: {
    push: () => ({
      object_kind: 'push',
      event_name: 'push',
      before: hex(20),
      after: hex(20),
      ref: 'refs/heads/main',
      user_username: 'jsmith',
      project_id: 15,
      project: { id: 15, name: 'checkout', path_with_namespace: 'acme/checkout' },
      commits: [{ id: hex(20), message: 'Charge once', timestamp: iso() }],
      total_commits_count: 1,
    }),
  },
  bitbucket: {
    'repo:push': () => ({
      actor: { display_name: 'Jenny Rosen', uuid: `{${randomUUID()}}` },
      repository: { full_name: 'acme/checkout', uuid: `{${randomUUID()}}` },
      push: { changes: [{ new: { type: 'branch', name: 'main', target: { hash: hex(20), message: 'Charge once\n' } } }] },
    }),
  },
  sentry: {
    'issue.created': () => ({
      action: 'created',
      installation: { uuid: randomUUID() },
      data: { issue: { id: String(Date.now()), title: 'TypeError: charge is undefined', culprit: 'checkout/pay', status: 'unresolved', firstSeen: iso() } },
      actor: { type: 'application', id: 'sentry', name: 'Sentry' },
    }),
  },
  vercel: {
    'deployment.succeeded': () => ({
      id: `evt_${hex(12)}`,
      type: 'deployment.succeeded',
      createdAt: Date.now(),
      region: 'iad1',
      payload: { deployment: { id: `dpl_${hex(12)}`, url: 'checkout-acme.vercel.app', name: 'checkout' }, project: { id: `prj_${hex(12)}` }, target: 'production' },
    }),
  },
  typeform: {
    form_response: () => ({
      event_id: hex(13).toUpperCase(),
      event_type: 'form_response',
      form_response: {
        form_id: 'lT4Z3j',
        token: hex(16),
        submitted_at: iso(),
        answers: [{ type: 'email', email: 'jenny@example.com', field: { id: 'SMEUb7VJz92Q', type: 'email' } }],
      },
    }),
  },
  calendly: {
    'invitee.created': () => ({
      event: 'invitee.created',
      created_at: iso(),
      created_by: `https://api.calendly.com/users/${hex(8)}`,
      payload: { uri: `https://api.calendly.com/scheduled_events/${hex(8)}/invitees/${hex(8)}`, email: 'jenny@example.com', name: 'Jenny Rosen', status: 'active' },
    }),
  },
  lemonsqueezy: {
    order_created: () => ({
      meta: { event_name: 'order_created', custom_data: { customer_id: 25 } },
      data: { type: 'orders', id: String(Date.now()), attributes: { store_id: 1, identifier: randomUUID(), total: 999, currency: 'USD', status: 'paid', created_at: iso() } },
    }),
  },
  woocommerce: {
    'order.created': () => ({
      id: Math.floor(Math.random() * 100_000),
      status: 'processing',
      currency: 'USD',
      total: '29.35',
      date_created: iso().slice(0, 19),
      billing: { first_name: 'Jenny', last_name: 'Rosen', email: 'jenny@example.com' },
      line_items: [{ id: 315, name: 'Woo Single #1', quantity: 2, total: '6.00' }],
    }),
  },
  'coinbase-commerce': {
    'charge:confirmed': () => ({
      id: Math.floor(Math.random() * 1_000_000),
      scheduled_for: iso(),
      event: {
        id: randomUUID(),
        resource: 'event',
        type: 'charge:confirmed',
        api_version: '2018-03-22',
        created_at: iso(),
        data: { code: hex(4).toUpperCase(), name: 'Order 42' },
      },
    }),
  },
  zoom: {
    'meeting.started': () => ({
      event: 'meeting.started',
      event_ts: Date.now(),
      payload: { account_id: hex(11), object: { id: String(Date.now()), uuid: `${hex(11)}==`, topic: 'Checkout review', start_time: iso() } },
    }),
  },
  twitch: {
    'channel.follow': () => ({
      subscription: { id: randomUUID(), status: 'enabled', type: 'channel.follow', version: '2', cost: 0, condition: { broadcaster_user_id: '1337' }, created_at: iso() },
      event: { user_id: '1234', user_login: 'cool_user', broadcaster_user_id: '1337', broadcaster_user_login: 'cooler_user', followed_at: iso() },
    }),
  },
  meta: {
    messages: () => ({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: String(Date.now()),
          time: now(),
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: { display_phone_number: '15550000000', phone_number_id: '123456123' },
                messages: [{ from: '16315551181', id: `wamid.${hex(16)}`, timestamp: String(now()), type: 'text', text: { body: 'Where is my order?' } }],
              },
            },
          ],
        },
      ],
    }),
  },
  discord: {
    APPLICATION_AUTHORIZED: () => ({
      version: 1,
      application_id: '1234560123453231555',
      type: 1,
      event: {
        type: 'APPLICATION_AUTHORIZED',
        timestamp: iso(),
        data: { integration_type: 0, scopes: ['applications.commands'], user: { id: String(Date.now()), username: 'jenny' } },
      },
    }),
  },
  paystack: {
    'charge.success': () => ({
      event: 'charge.success',
      data: {
        id: Math.floor(Math.random() * 1e9),
        domain: 'test',
        status: 'success',
        reference: hex(6),
        amount: 50000,
        currency: 'NGN',
        paid_at: iso(),
        customer: { email: 'jenny@example.com' },
      },
    }),
  },
  razorpay: {
    'payment.captured': () => ({
      entity: 'event',
      account_id: `acc_${hex(7)}`,
      event: 'payment.captured',
      contains: ['payment'],
      created_at: now(),
      payload: { payment: { entity: { id: `pay_${hex(7)}`, amount: 50000, currency: 'INR', status: 'captured', email: 'jenny@example.com' } } },
    }),
  },
  mux: {
    'video.asset.ready': () => ({
      type: 'video.asset.ready',
      id: randomUUID(),
      created_at: iso(),
      object: { type: 'asset', id: hex(16) },
      environment: { name: 'Production', id: hex(3) },
      data: { id: hex(16), status: 'ready', duration: 23.4, playback_ids: [{ id: hex(16), policy: 'public' }] },
    }),
  },
  twilio: {
    'message.delivered': () => ({
      MessageSid: `SM${hex(16)}`,
      SmsSid: `SM${hex(16)}`,
      AccountSid: `AC${hex(16)}`,
      MessagingServiceSid: `MG${hex(16)}`,
      From: '+15017122661',
      To: '+15558675310',
      MessageStatus: 'delivered',
      SmsStatus: 'delivered',
      ApiVersion: '2010-04-01',
    }),
  },
};
