/** GitLab: how it signs and what it sends (https://docs.gitlab.com/user/project/integrations/webhooks/). */
import { DAY, iso, hex, type TableSender } from './sender-kit.js';

export const gitlab: TableSender = {
  scheme: {
    kind: 'gitlab',
    title: 'GitLab',
    env: 'GITLAB_WEBHOOK_TOKEN',
    secretName: 'secret token',
    key: 'text',
    signature: { family: 'token', header: 'X-Gitlab-Token' },
    // Idempotency-Key: the same on automatic and manual retries of one delivery (GitLab 17.4+).
    id: { header: 'Idempotency-Key' },
    type: { field: 'object_kind' },
    redelivery: DAY(2, 'GitLab can resend a delivery from the webhook request history of the last 2 days'),
    dev: 'local-development-gitlab-token',
    docs: 'https://docs.gitlab.com/user/project/integrations/webhooks/',
  },
  payloads: {
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
};
