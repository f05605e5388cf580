import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createSandbox, type FaultRule, type Sandbox, type Service, type ServiceStats } from '@oncehook/sandbox';

export interface SandboxHandle {
  url: string;
  sandbox: Sandbox;
  stats(): Record<Service, ServiceStats>;
  faults(rules: FaultRule[]): void;
  close(): Promise<void>;
}

/** The sandbox effect APIs on a real HTTP port, in the test process. */
export async function startSandbox(): Promise<SandboxHandle> {
  const sandbox = createSandbox();
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: sandbox.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server)) as Server;
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    sandbox,
    stats: () => sandbox.stats(),
    faults: (rules) => sandbox.setFaults(rules),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Every applied effect was applied once per key. */
export function maxAppliedPerKey(stats: ServiceStats): number {
  return Math.max(0, ...Object.values(stats.appliedByKey));
}
