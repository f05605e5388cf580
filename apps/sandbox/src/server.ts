/**
 * `npm run start:sandbox`: the sandbox payment, email and fulfilment APIs on SANDBOX_PORT
 * (default 4010). Point the worker at it with PAYMENT_API_URL=http://127.0.0.1:4010/payment,
 * EMAIL_API_URL=.../email, FULFILMENT_API_URL=.../fulfilment (the worker's defaults).
 */
import { serve } from '@hono/node-server';
import { z } from 'zod';
import { onShutdownSignal, runMain, ConfigError } from '@oncehook/shared';
import { createSandbox } from './app';

runMain(async () => {
  const parsed = z.object({ SANDBOX_PORT: z.coerce.number().int().min(0).max(65535).default(4010), HOST: z.string().default('127.0.0.1') }).safeParse(process.env);
  if (!parsed.success) throw new ConfigError(`Invalid configuration: SANDBOX_PORT must be a port number`);
  const sandbox = createSandbox();
  const server = serve({ fetch: sandbox.app.fetch, port: parsed.data.SANDBOX_PORT, hostname: parsed.data.HOST }, (info) => {
    process.stdout.write(`sandbox listening on ${info.port}\n`);
  });
  onShutdownSignal(async () => {
    await new Promise((resolve) => server.close(resolve));
  }, 5_000);
});
