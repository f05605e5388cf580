/** `npm run demo` completes and tells its story (on this machine's Postgres and Redis). */
import { spawn } from 'node:child_process';
import { expect, it } from 'vitest';
import { ROOT } from '@oncehook/harness';

it('npm run demo completes with every effect applied once', { timeout: 120_000 }, async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/demo.ts', '--events', '30'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  expect(code, output).toBe(0);
  expect(output).toMatch(/new \(202\):\s+30\b/);
  expect(output).toMatch(/Events:\s+30 done/);
  expect(output).toMatch(/most applied per idempotency key: 1\)/);
  expect(output).toMatch(/charges \(renewals\): 10\n\s+receipts \(orders\):\s+10\n\s+shipments \(orders\): 10/);
});
