/**
 * A table sender's descriptor, read from its scheme (senders.ts): the same shape as an
 * adapter's (descriptor.ts), so everything that reads the provider list reads both alike.
 */
import type { SenderKind } from '@oncehook/sdk';
import { z } from 'zod';
import { SENDER_FIXTURES } from './senders.js';
import { signSchemeDelivery } from './signing/sign-scheme.js';
import { type OptionVariable, type ProviderDescriptor, secretsVariable, toleranceOption } from './descriptor.js';
import { createSchemeSource, type SenderScheme } from './scheme.js';

/**
 * The variables of a table sender: its secrets (the entry's `env`); `<KIND>_WEBHOOK_URL` where
 * the sender signs the URL it posts to; `<KIND>_VERIFY_TOKEN` where it checks the endpoint with a GET.
 */
export function senderVariables(scheme: SenderScheme): { secrets: string; url?: string; verifyToken?: string } {
  const prefix = scheme.kind.toUpperCase().replace(/-/g, '_');
  const signsUrl = 'signed' in scheme.signature && scheme.signature.signed.includes('url');
  return { secrets: scheme.env, ...(signsUrl ? { url: `${prefix}_WEBHOOK_URL` } : {}), ...(scheme.get ? { verifyToken: `${prefix}_VERIFY_TOKEN` } : {}) };
}

export function senderDescriptor(scheme: SenderScheme): ProviderDescriptor {
  const variables = senderVariables(scheme);
  const options: OptionVariable[] = [];
  if (variables.url) {
    options.push({
      name: variables.url,
      option: 'url',
      schema: z.string().optional(),
      shown: 'unset',
      meaning: `Required with \`${variables.secrets}\`: the public URL ${scheme.title} posts to, exactly as configured there (${scheme.title} signs it)`,
      dev: `http://127.0.0.1:3000/webhooks/${scheme.kind}`,
    });
  }
  if (variables.verifyToken) {
    options.push({
      name: variables.verifyToken,
      option: 'verifyToken',
      schema: z.string().optional(),
      shown: 'unset',
      meaning: `Required with \`${variables.secrets}\`: the verify token of ${scheme.title}'s GET subscription check`,
      dev: `local-development-${scheme.kind}-verify-token`,
    });
  }
  const dev = typeof scheme.dev === 'string' ? scheme.dev : scheme.dev.public;
  return {
    kind: scheme.kind as SenderKind,
    title: scheme.title,
    docs: scheme.docs,
    env: {
      secrets: secretsVariable(
        variables.secrets,
        `${scheme.title} ${scheme.secretName}(s), comma-separated. Enables \`/webhooks/${scheme.kind}\` (docs/providers.md, "Senders described as data")`,
        dev,
      ),
      options,
    },
    redelivery: scheme.redelivery,
    options: {
      toleranceSeconds: toleranceOption,
      /** The public URL the sender posts to (HubSpot, Square sign it). */
      url: z.string().url().optional(),
      /** Meta's verify token (the GET subscription check). */
      verifyToken: z.string().min(1).optional(),
    },
    create: ({ name, secrets, options: checked }) =>
      createSchemeSource(scheme, {
        name,
        secrets,
        toleranceSeconds: checked.toleranceSeconds as number | undefined,
        url: checked.url as string | undefined,
        verifyToken: checked.verifyToken as string | undefined,
      }),
    sign: (payload, secret, signOptions) => {
      const { body, headers, eventId } = signSchemeDelivery(scheme, payload, secret, signOptions);
      return { body, headers, eventId };
    },
    payloads: SENDER_FIXTURES[scheme.kind as SenderKind],
    ...(typeof scheme.dev === 'string' ? {} : { devKeyPair: scheme.dev }),
  };
}
