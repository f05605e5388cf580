/**
 * `@oncehook/sdk/github`: GitHub's event types for handlers of `github` sources. Import it once
 * (`import '@oncehook/sdk/github';`, types only; needs `@octokit/webhooks`): a handler's `type`
 * is then an event name, or `name.action` (`push`, `issues.opened`), and its payload the
 * matching payload from octokit's event map. Also re-exports the whole SDK.
 */
import type { EmitterWebhookEvent, EmitterWebhookEventName } from '@octokit/webhooks';

export * from './index.js';

/** GitHub's event names, with and without their action. */
export type GitHubEventType = EmitterWebhookEventName;

/** The GitHub payload of one event (`push`) or event and action (`issues.opened`). */
export type GitHubPayload<T extends GitHubEventType> = EmitterWebhookEvent<T>['payload'];

declare module './provider-events.js' {
  interface ProviderEventTypes {
    github: { [T in GitHubEventType]: GitHubPayload<T> };
  }
}
