/**
 * `npm start`: this repository's example, in the foreground: the sandbox APIs (fake payment,
 * email and fulfilment providers the example shop calls), then `oncehook dev` running the
 * example shop's handlers and migrations against them. Everything else (finding or embedding
 * a Postgres, the queue, migrate, ingest and the workers, the banner, Ctrl-C) is `oncehook dev`,
 * exactly as a team runs it on its own handlers (packages/oncehook/src/cli/dev-command.ts).
 *
 *   SANDBOX_PORT (default 4010)   where the sandbox listens
 *   the rest                      as `oncehook dev --help` says (WORKERS, PORT, DATABASE_URL, ...)
 */
import { spawn } from 'node:child_process';
import { ROOT, SOURCE_NODE_ARGS } from '@oncehook/harness';
import { runCli } from 'oncehook/cli';

const say = (line: string) => process.stderr.write(`oncehook: ${line}\n`);

const sandboxPort = process.env.SANDBOX_PORT ?? '4010';
const sandbox = spawn(process.execPath, [...SOURCE_NODE_ARGS, 'apps/sandbox/src/server.ts'], {
  cwd: ROOT,
  env: { ...process.env, SANDBOX_PORT: sandboxPort, LOG_FORMAT: process.env.LOG_FORMAT ?? 'pretty' },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const sandboxUrl = await new Promise<string>((resolve, reject) => {
  sandbox.stdout.on('data', (chunk: Buffer) => {
    process.stdout.write(chunk);
    const port = /sandbox listening on (\d+)/.exec(chunk.toString())?.[1];
    if (port) resolve(`http://127.0.0.1:${port}`);
  });
  sandbox.once('exit', (code) => reject(new Error(`the sandbox exited (code ${code}) before it was ready: is SANDBOX_PORT ${sandboxPort} free?`)));
}).catch((error: unknown) => {
  say((error as Error).message);
  process.exit(1);
});
process.stdout.write(`oncehook: sandbox APIs on ${sandboxUrl} (the example shop's payment, email and fulfilment providers; fake: never in production)\n`);
process.once('exit', () => sandbox.kill('SIGTERM'));

// The example shop's settings, pointed at the sandbox (a shell value wins).
process.env.SHOP_PAYMENT_API_URL ??= `${sandboxUrl}/payment`;
process.env.SHOP_EMAIL_API_URL ??= `${sandboxUrl}/email`;
process.env.SHOP_FULFILMENT_API_URL ??= `${sandboxUrl}/fulfilment`;
process.env.ONCEHOOK_HANDLERS ??= 'examples/shop';

const code = await runCli(['dev', '--dir', 'examples/shop/migrations', '--set', 'shop'], [process.execPath, ...SOURCE_NODE_ARGS, 'packages/oncehook/src/cli/entry.ts']);
sandbox.kill('SIGTERM');
process.exit(code === 'running' ? 0 : code);
