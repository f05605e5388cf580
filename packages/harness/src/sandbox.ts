import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createSandbox, type FaultRule, type Sandbox, type Service, type ServiceStats, type WorkStats } from '@oncehook/sandbox';

export interface SandboxHandle {
  url: string;
  sandbox: Sandbox;
  stats(): Record<Service, ServiceStats>;
  /** The work API's own in-flight measurements, per task (POST /work/tasks). */
  work(task: string): WorkStats;
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
    work: (task) =>
      sandbox.workStats()[task] ?? { calls: 0, applied: 0, replays: 0, maxInFlight: 0, maxInFlightPerKey: 0, maxKeysInFlight: 0, starts: [], appliedByKey: {}, abandoned: 0 },
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
