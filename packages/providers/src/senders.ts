/**
 * The built-in senders described as data: one file per sender in senders/ (its scheme and its
 * payloads), listed here. Adding a sender is its file and its line below, plus its name in
 * @oncehook/sdk's SENDER_KINDS (the type checker asks for all three) and its case in the
 * harness (sender-cases.ts), whose deliveries are signed by the sender's official library or
 * by its documented example; `npm run docs:senders` then writes its documentation.
 *
 * Each entry was checked against the sender's documentation (`docs`) and, where one exists on
 * npm, its official verifier (test/providers.test.ts signs with it). The `dev` secrets are
 * public development values used only by `oncehook dev` / `oncehook send`.
 */
import type { SenderKind } from '@oncehook/sdk';
import type { SenderScheme } from './scheme.js';
import { linear } from './senders/linear.js';
import { intercom } from './senders/intercom.js';
import { hubspot } from './senders/hubspot.js';
import { square } from './senders/square.js';
import { sendgrid } from './senders/sendgrid.js';
import { mailgun } from './senders/mailgun.js';
import { postmark } from './senders/postmark.js';
import { gitlab } from './senders/gitlab.js';
import { bitbucket } from './senders/bitbucket.js';
import { sentry } from './senders/sentry.js';
import { vercel } from './senders/vercel.js';
import { typeform } from './senders/typeform.js';
import { calendly } from './senders/calendly.js';
import { lemonsqueezy } from './senders/lemonsqueezy.js';
import { woocommerce } from './senders/woocommerce.js';
import { coinbaseCommerce } from './senders/coinbase-commerce.js';
import { zoom } from './senders/zoom.js';
import { twitch } from './senders/twitch.js';
import { meta } from './senders/meta.js';
import { discord } from './senders/discord.js';
import { paystack } from './senders/paystack.js';
import { razorpay } from './senders/razorpay.js';
import { mux } from './senders/mux.js';
import { twilio } from './senders/twilio.js';
import type { PayloadBuilder, TableSender } from './senders/sender-kit.js';

/** Every table sender, by kind. */
export const SENDERS: Readonly<Record<SenderKind, TableSender>> = {
  linear,
  intercom,
  hubspot,
  square,
  sendgrid,
  mailgun,
  postmark,
  gitlab,
  bitbucket,
  sentry,
  vercel,
  typeform,
  calendly,
  lemonsqueezy,
  woocommerce,
  'coinbase-commerce': coinbaseCommerce,
  zoom,
  twitch,
  meta,
  discord,
  paystack,
  razorpay,
  mux,
  twilio,
};

const byKind = <T>(pick: (sender: TableSender) => T) => Object.fromEntries(Object.entries(SENDERS).map(([kind, sender]) => [kind, pick(sender)])) as Record<SenderKind, T>;

/** Each table sender's scheme, by kind. */
export const SENDER_SCHEMES: Readonly<Record<SenderKind, SenderScheme>> = byKind((sender) => sender.scheme);

/** Each table sender's payloads by event type, by kind. */
export const SENDER_FIXTURES: Readonly<Record<SenderKind, Record<string, PayloadBuilder>>> = byKind((sender) => sender.payloads);

export const SENDER_KIND_LIST = Object.keys(SENDER_SCHEMES) as SenderKind[];

export function isSenderKind(kind: string): kind is SenderKind {
  return Object.hasOwn(SENDER_SCHEMES, kind);
}
