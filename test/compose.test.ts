/**
 * docker-compose.yml is a deliverable even though Docker cannot run here: Debian's
 * docker-compose validates and resolves it, and we check the parts the design depends on.
 * (.ci/run installs docker-compose.)
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from '@oncehook/harness';

const run = promisify(execFile);

async function config(env: Record<string, string>): Promise<string> {
  const { stdout } = await run('docker-compose', ['config'], { cwd: ROOT, env: { ...process.env, ...env } });
  return stdout;
}

interface ComposeService {
  profiles?: string[];
  command?: string[];
  deploy?: { replicas?: number };
  depends_on?: Record<string, { condition: string }>;
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
}

it('docker-compose config accepts the file and wires the stack as designed', async () => {
  const resolved = parse(await config({ STRIPE_WEBHOOK_SECRET: 'whsec_compose_check' })) as { services: Record<string, ComposeService> };
  const { services } = resolved;
  expect(Object.keys(services).sort()).toEqual(['grafana', 'ingest', 'migrate', 'postgres', 'prometheus', 'redis', 'sandbox', 'worker']);
  expect(services.prometheus?.profiles).toEqual(['monitoring']);
  expect(services.grafana?.profiles).toEqual(['monitoring']);
  expect(services.worker?.environment?.METRICS_PORT).toBe('9464');
  const redisCommand = services.redis?.command?.join(' ') ?? '';
  expect(redisCommand).toContain('--appendonly yes');
  expect(redisCommand).toContain('--maxmemory-policy noeviction');
  for (const app of ['ingest', 'worker']) {
    expect(services[app]?.depends_on?.migrate).toEqual({ condition: 'service_completed_successfully' });
    expect(services[app]?.environment?.DATABASE_URL).toMatch(/@postgres:5432\//);
    expect(services[app]?.environment?.REDIS_URL).toBe('redis://redis:6379');
  }
  expect(services.migrate?.depends_on?.postgres).toEqual({ condition: 'service_healthy' });
  expect(services.worker?.deploy?.replicas).toBeGreaterThanOrEqual(2);
  expect(services.ingest?.environment?.STRIPE_WEBHOOK_SECRET).toBe('whsec_compose_check');
  for (const name of ['postgres', 'redis', 'ingest', 'worker']) expect(services[name]?.healthcheck?.test.length).toBeGreaterThan(0);
});

it('passes every provider secret through to ingest, empty when unset', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, GITHUB_WEBHOOK_SECRET: 'gh_from_env' };
  delete env.STRIPE_WEBHOOK_SECRET;
  const { stdout } = await run('docker-compose', ['config'], { cwd: ROOT, env });
  const environment = (parse(stdout) as { services: Record<string, ComposeService> }).services.ingest?.environment ?? {};
  expect(environment.GITHUB_WEBHOOK_SECRET).toBe('gh_from_env');
  for (const name of ['STRIPE_WEBHOOK_SECRET', 'SHOPIFY_WEBHOOK_SECRET', 'STANDARD_WEBHOOKS_SECRET', 'SLACK_SIGNING_SECRET', 'PADDLE_WEBHOOK_SECRET', 'ONCEHOOK_SOURCES_FILE']) {
    expect(environment[name]).toBe('');
  }
});
