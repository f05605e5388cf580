/**
 * GitHub: `X-Hub-Signature-256: sha256=<hex>` = HMAC-SHA256 of the raw body. The legacy SHA-1
 * `X-Hub-Signature` is never accepted on its own. No signed timestamp exists, so there is no
 * tolerance check.
 *
 * Stable id: `X-GitHub-Delivery` is the same on redelivery, but it is shared by every hook
 * subscribed to the event, so the event id is `<X-GitHub-Hook-ID>:<X-GitHub-Delivery>`.
 * Type: `X-GitHub-Event`, plus `.<action>` when the payload has one (`issues.opened`).
 *
 * The id and the event name travel in headers the signature does not cover. So (docs/providers.md):
 * - the body is a second dedupe key (sha256 of the raw body, per source): a captured body
 *   replayed under a new delivery id is a duplicate (`bodyDedupe`, on by default; GitHub's
 *   redeliveries repeat both the delivery id and the body, and two distinct events never have
 *   byte-identical bodies);
 * - the event name is checked against the body where the body shows it (an `issues` body has
 *   `issue`, a `push` has `commits`, ...): a body replayed under another event name is a 400.
 * Rotation: GitHub signs with one secret; we accept any configured one.
 *
 * Content types: a hook created with `content_type: form` (the REST API's default, and a choice
 * in the UI) posts `application/x-www-form-urlencoded` with `payload=<url-encoded JSON>`. As
 * octokit does, the signature is checked on the raw bytes as they arrived, THEN the form is
 * decoded; the event stored is the JSON inside, and the body hash (dedupe) stays the raw bytes'.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { GITHUB_PAYLOADS } from './signing/adapter-fixtures.js';
import { JSON_CONTENT, bodyText, hmacParts } from './signing/sign-helpers.js';
import { defineAdapter, secretsVariable, type SignedDelivery, type SignedDeliveryOptions } from './descriptor.js';
import { VerificationError } from '@oncehook/shared';
import { githubBackfill } from './github-backfill.js';
import { requireBodySignature } from './hmac.js';
import type { VerifiedEvent } from '@oncehook/shared';
import { bodyHash, checkEventId, checkEventType, headerSignedSource, compactMeta, parseJsonObject, requireHeader, type DeliveryRequest, type WebhookSource } from './types.js';

export interface GitHubSourceOptions {
  name?: string;
  secrets: string[];
  /** Deduplicate on the body too (default true): the delivery id is not signed. */
  bodyDedupe?: boolean;
}

/** The top-level field every body of a GitHub event has: what an event name is checked against. */
export const GITHUB_EVENT_FIELDS: Readonly<Record<string, string>> = {
  branch_protection_rule: 'rule',
  check_run: 'check_run',
  check_suite: 'check_suite',
  commit_comment: 'comment',
  create: 'ref_type',
  delete: 'ref_type',
  deployment: 'deployment',
  deployment_status: 'deployment_status',
  discussion: 'discussion',
  discussion_comment: 'comment',
  fork: 'forkee',
  installation: 'installation',
  installation_repositories: 'repositories_added',
  issue_comment: 'comment',
  issues: 'issue',
  label: 'label',
  member: 'member',
  milestone: 'milestone',
  package: 'package',
  ping: 'zen',
  project: 'project',
  pull_request: 'pull_request',
  pull_request_review: 'review',
  pull_request_review_comment: 'comment',
  pull_request_review_thread: 'thread',
  push: 'commits',
  release: 'release',
  repository_dispatch: 'client_payload',
  star: 'starred_at',
  status: 'sha',
  workflow_dispatch: 'workflow',
  workflow_job: 'workflow_job',
  workflow_run: 'workflow_run',
};

function parseHeaders(header: DeliveryRequest['header']) {
  const signature = header('X-Hub-Signature-256');
  if (!signature) {
    const legacy = header('X-Hub-Signature') ? ' (the legacy SHA-1 X-Hub-Signature alone is not accepted)' : '';
    throw new VerificationError(400, 'missing_header', `missing X-Hub-Signature-256 header${legacy}`);
  }
  const match = /^sha256=([0-9a-f]{64})$/.exec(signature);
  if (!match?.[1]) throw new VerificationError(400, 'malformed_header', 'X-Hub-Signature-256 must be sha256=<64 lowercase hex digits>');
  return {
    signature: match[1],
    delivery: requireHeader({ header }, 'X-GitHub-Delivery'),
    hookId: requireHeader({ header }, 'X-GitHub-Hook-ID'),
    eventName: requireHeader({ header }, 'X-GitHub-Event'),
  };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The JSON of a verified delivery: the body itself (content type `json`), or the `payload`
 * field of a form-encoded body (content type `form`), decoded after the signature was checked.
 */
function githubJson(request: DeliveryRequest): Buffer {
  const contentType = (request.header('Content-Type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (contentType !== 'application/x-www-form-urlencoded') return request.rawBody;
  let form: URLSearchParams;
  try {
    form = new URLSearchParams(utf8.decode(request.rawBody));
  } catch {
    throw new VerificationError(400, 'malformed_payload', 'form-encoded GitHub delivery is not valid UTF-8');
  }
  const payload = form.getAll('payload');
  if (payload.length !== 1) {
    throw new VerificationError(400, 'malformed_payload', "a form-encoded GitHub delivery carries exactly one payload= field (or set the hook's content type to application/json)");
  }
  return Buffer.from(payload[0]!, 'utf8');
}

export function createGitHubSource(options: GitHubSourceOptions): WebhookSource {
  const dedupeOnBody = options.bodyDedupe ?? true;
  return headerSignedSource('github', options, 'GitHub webhook', parseHeaders, (request, { signature, delivery, hookId, eventName }, name) => {
    // mutant: github-form-unsigned-bytes
    requireBodySignature(options.secrets, request.rawBody, 'hex', signature, 'X-Hub-Signature-256');

    return {
      event: githubEvent(
        name,
        { delivery, hookId, eventName, targetType: request.header('X-GitHub-Hook-Installation-Target-Type') },
        githubJson(request),
        // mutant: github-body-dedupe-off
        dedupeOnBody ? bodyHash(request.rawBody) : null,
      ),
    };
  });
}

/**
 * The event of a GitHub delivery whose authenticity is established (its signature verified, or
 * read from GitHub's API with the account's token: github-backfill.ts): the id
 * `<hook id>:<delivery>`, the type `event[.action]`, the event name checked against the body.
 * Throws VerificationError.
 */
export function githubEvent(
  source: string,
  headers: { delivery: string; hookId: string; eventName: string; targetType: string | null },
  json: Buffer,
  hash: Buffer | null,
): VerifiedEvent {
  const { delivery, hookId, eventName } = headers;
  const eventId = checkEventId(`${hookId}:${delivery}`, 'X-GitHub-Hook-ID:X-GitHub-Delivery');
  const parsed = parseJsonObject(json, 'GitHub event');
  const field = GITHUB_EVENT_FIELDS[eventName];
  // mutant: github-event-unchecked
  if (field !== undefined && !(field in parsed.json)) {
    throw new VerificationError(400, 'malformed_payload', `X-GitHub-Event is "${eventName}" but the body has no "${field}": the header does not belong to this body`);
  }
  const type = checkEventType(typeof parsed.json.action === 'string' ? `${eventName}.${parsed.json.action}` : eventName, 'X-GitHub-Event');
  return {
    source: source,
    kind: 'github',
    eventId,
    type,
    signedAt: null,
    rawBody: parsed.text,
    payload: parsed.json,
    meta: compactMeta({ hookId, delivery, event: eventName, targetType: headers.targetType }),
    bodyHash: hash,
  };
}

/**
 * Signs as GitHub does: `sha256=<hex>` of the body; the delivery id, event name (the type up to
 * its first dot) and hook id in headers; the stored id is `<hook id>:<delivery>`.
 */
export function signGitHubDelivery(payload: unknown, secret: string, options: SignedDeliveryOptions = {}): SignedDelivery {
  const body = bodyText(payload);
  const delivery = options.id ?? randomUUID();
  const hookId = options.hookId ?? '1';
  const event = (options.type ?? 'ping').split('.')[0]!;
  return {
    body,
    headers: {
      ...JSON_CONTENT,
      'x-github-delivery': delivery,
      'x-github-event': event,
      'x-github-hook-id': hookId,
      'x-hub-signature-256': `sha256=${hmacParts(secret, body).toString('hex')}`,
    },
    eventId: `${hookId}:${delivery}`,
  };
}

export const GITHUB_ADAPTER = defineAdapter({
  kind: 'github',
  title: 'GitHub',
  docs: 'https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries',
  env: {
    secrets: secretsVariable('GITHUB_WEBHOOK_SECRET', 'GitHub webhook secret(s). Enables `/webhooks/github`', 'local-development-github-secret'),
    options: [],
  },
  redelivery: { days: 3, what: 'GitHub redelivers (manually or through its API) deliveries of the last 3 days' },
  options: { bodyDedupe: z.boolean().optional() },
  create: createGitHubSource,
  sign: signGitHubDelivery,
  payloads: GITHUB_PAYLOADS,
  backfill: githubBackfill(githubEvent),
});
