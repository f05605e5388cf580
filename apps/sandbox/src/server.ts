/**
 * `npm run start:sandbox`: the sandbox payment, email and fulfilment APIs on SANDBOX_PORT
 * (default 4010). Point the example's worker at it with SHOP_PAYMENT_API_URL=
 * http://127.0.0.1:4010/payment, SHOP_EMAIL_API_URL=.../email, SHOP_FULFILMENT_API_URL=.../fulfilment.
 */
import { serve } from '@hono/node-server';
import { z } from 'zod';
import { ConfigError } from '@oncehook/sdk';
import { listenFailure, onShutdownSignal, runMain } from '@oncehook/shared';
import { createSandbox } from '@oncehook/sandbox';

runMain(async () => {
  const parsed = z.object({ SANDBOX_PORT: z.coerce.number().int().min(0).max(65535).default(4010), HOST: z.string().default('127.0.0.1') }).safeParse(process.env);
  if (!parsed.success) throw new ConfigError(`Invalid configuration: SANDBOX_PORT must be a port number`);
  const sandbox = createSandbox();
  const { SANDBOX_PORT: port, HOST: hostname } = parsed.data;
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: sandbox.app.fetch, port, hostname }, (info) => {
      process.stdout.write(`sandbox listening on ${info.port}\n`);
      resolve(s);
    });
    s.once('error', (error) => reject(listenFailure(error, port, 'SANDBOX_PORT')));
  });
  onShutdownSignal(async () => {
    await new Promise((resolve) => server.close(resolve));
  }, 5_000);
});
