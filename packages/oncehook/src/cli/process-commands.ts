/**
 * `oncehook ingest` and `oncehook worker`: the two processes of a deployment, configured by
 * the environment (README: Configuration), exactly as the image and compose run them.
 */
import { parseArgs } from 'node:util';
import { runIngest } from '../ingest/run-ingest.js';
import { runWorker } from '../worker/run-worker.js';
import { type Command, UsageError } from './command.js';

function noArguments(command: string, args: string[]): void {
  try {
    parseArgs({ args, options: {} });
  } catch (error) {
    throw new UsageError(`${command} takes no arguments; it is configured by environment variables (${(error as Error).message})`);
  }
}

export const ingestCommand: Command = {
  name: 'ingest',
  summary: 'receive webhooks: verify, claim, answer (HTTP on PORT)',
  usage: 'oncehook ingest',
  help: `Receives deliveries on POST /webhooks/<source>, verifies them, claims each event once in
Postgres and answers; the admin at /admin when credentials are set; /metrics, /readyz,
/healthz (and liveness on HEALTH_PORT). Configured by the environment: DATABASE_URL, the
queue's (QUEUE_BACKEND, REDIS_URL), your providers' secrets (STRIPE_WEBHOOK_SECRET, ...,
or ONCEHOOK_SOURCES_FILE), PORT. Runs until SIGTERM or Ctrl-C, then finishes in-flight
deliveries. Run as many as you like behind a load balancer.`,
  async run(args, { env }) {
    noArguments('ingest', args);
    await runIngest(env);
    return 'running';
  },
};

export const workerCommand: Command = {
  name: 'worker',
  summary: 'run your handlers on the claimed events (any number of processes)',
  usage: 'oncehook worker [--handlers ./src/webhooks]',
  help: `Runs the handlers of your modules on every claimed event, exactly once each: leases,
fenced steps, retries, the reconciler (one leader at a time). --handlers (or
ONCEHOOK_HANDLERS) names your handler modules: files or folders, .js or .ts (TypeScript runs
through tsx), comma-separated; each module's default export is a handler or an array of them.
Configured by the environment like ingest (DATABASE_URL, the queue's, LEASE_MS, MAX_ATTEMPTS,
...). Runs until SIGTERM or Ctrl-C, then finishes the jobs in flight.`,
  async run(args, { env }) {
    let handlers: string[] | undefined;
    try {
      ({
        values: { handlers },
      } = parseArgs({ args, options: { handlers: { type: 'string', multiple: true } } }));
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
    await runWorker(handlers ? { ...env, ONCEHOOK_HANDLERS: handlers.join(',') } : env);
    return 'running';
  },
};
