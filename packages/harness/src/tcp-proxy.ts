/**
 * A TCP proxy of the harness between a process and a server (Postgres, Redis, a replica's
 * link to its primary), for the faults a network makes and `tc netem` cannot make here (no
 * kernel module):
 *   - `pointAt(port)`: new connections go to another server, the open ones are cut, as a cloud
 *     database endpoint moves to a promoted replica;
 *   - `stall()` / `resume()`: bytes stop flowing both ways while every socket stays open (the
 *     classic stuck connection: no error, no answer), then flow again;
 *   - `reset()`: every open connection reset (RST), as a middlebox dropping its state;
 *   - `setFaults({ latencyMs, jitterMs, bytesPerSecond })`: a slow, uneven, narrow link.
 */
import net from 'node:net';

export interface TcpProxy {
  /** Where clients connect (127.0.0.1). */
  port: number;
  /** The server new connections go to. */
  target(): number;
  /** New connections go to `port`; every open connection is cut (reset). */
  pointAt(port: number): void;
  /** Bytes stop flowing both ways, on open and new connections; sockets stay open. */
  stall(): void;
  resume(): void;
  /** Every open connection reset. */
  reset(): void;
  /** Latency, jitter and a bandwidth limit on every connection from now on. */
  setFaults(faults: LinkFaults): void;
  faults(): LinkFaults;
  stalled(): boolean;
  /** Connections open now. */
  open(): number;
  close(): Promise<void>;
}

/** Faults applied to every byte both ways, until changed (`setFaults({})` clears them). */
export interface LinkFaults {
  /** Added to every chunk's trip, in ms. */
  latencyMs?: number;
  /** A random 0..jitterMs more per chunk (order kept: a chunk never overtakes the one before). */
  jitterMs?: number;
  /** Each direction of each connection limited to this many bytes per second. */
  bytesPerSecond?: number;
}

interface Pair {
  client: net.Socket;
  server: net.Socket;
  pumps: Pump[];
}

/** One direction of one connection: chunks wait in order until their time, then are written. */
interface Pump {
  from: net.Socket;
  to: net.Socket;
  queue: { chunk: Buffer; at: number }[];
  queued: number;
  /** When the last queued chunk leaves (order and bandwidth are kept from it). */
  lastAt: number;
  timer: NodeJS.Timeout | null;
}

/** Above this many bytes waiting in one direction, the proxy stops reading its source. */
const QUEUE_HIGH_WATER = 1 << 20;

/** Starts a proxy on a free port of 127.0.0.1 forwarding to 127.0.0.1:`targetPort`. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  let stalled = false;
  let faults: LinkFaults = {};
  const pairs = new Set<Pair>();

  const cut = (pair: Pair) => {
    pairs.delete(pair);
    for (const pump of pair.pumps) if (pump.timer) clearTimeout(pump.timer);
    pair.client.resetAndDestroy();
    pair.server.resetAndDestroy();
  };

  // Written by hand rather than with pipe(): pipe() resumes a paused source when its
  // destination drains, which would end a stall.
  const pumpOut = (pump: Pump) => {
    pump.timer = null;
    if (stalled || pump.to.destroyed) return;
    const now = performance.now();
    while (pump.queue.length > 0 && pump.queue[0]!.at <= now) {
      const { chunk } = pump.queue.shift()!;
      pump.queued -= chunk.length;
      pump.to.write(chunk);
    }
    if (pump.queue.length > 0) pump.timer = setTimeout(() => pumpOut(pump), Math.max(1, pump.queue[0]!.at - now));
    if (pump.queued < QUEUE_HIGH_WATER && pump.to.writableLength < QUEUE_HIGH_WATER && pump.from.isPaused() && !stalled) pump.from.resume();
  };

  const startPump = (from: net.Socket, to: net.Socket): Pump => {
    const pump: Pump = { from, to, queue: [], queued: 0, lastAt: 0, timer: null };
    from.on('data', (chunk: Buffer) => {
      const now = performance.now();
      const delay = (faults.latencyMs ?? 0) + Math.random() * (faults.jitterMs ?? 0);
      const transfer = faults.bytesPerSecond ? (chunk.length / faults.bytesPerSecond) * 1000 : 0;
      pump.lastAt = Math.max(now + delay, pump.lastAt) + transfer;
      pump.queue.push({ chunk, at: pump.lastAt });
      pump.queued += chunk.length;
      if (pump.queued >= QUEUE_HIGH_WATER || to.writableLength >= QUEUE_HIGH_WATER) from.pause();
      if (!pump.timer) pumpOut(pump);
    });
    to.on('drain', () => {
      if (!pump.timer) pumpOut(pump);
    });
    from.on('end', () => {
      // Half-close once what is queued has left.
      const endWhenEmpty = () => (pump.queue.length === 0 ? to.end() : setTimeout(endWhenEmpty, 5));
      endWhenEmpty();
    });
    return pump;
  };

  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: target });
    const pair: Pair = { client, server: upstream, pumps: [] };
    pairs.add(pair);
    pair.pumps.push(startPump(client, upstream), startPump(upstream, client));
    if (stalled) {
      client.pause();
      upstream.pause();
    }
    const gone = () => {
      if (pairs.has(pair)) cut(pair);
    };
    client.on('error', gone);
    upstream.on('error', gone);
    client.on('close', gone);
    upstream.on('close', gone);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  return {
    port,
    target: () => target,
    pointAt(next) {
      target = next;
      for (const pair of [...pairs]) cut(pair);
    },
    stall() {
      stalled = true;
      for (const { client, server: upstream } of pairs) {
        client.pause();
        upstream.pause();
      }
    },
    resume() {
      stalled = false;
      for (const pair of pairs) {
        pair.client.resume();
        pair.server.resume();
        for (const pump of pair.pumps) if (!pump.timer) pumpOut(pump);
      }
    },
    reset() {
      for (const pair of [...pairs]) cut(pair);
    },
    setFaults(next) {
      faults = { ...next };
    },
    faults: () => ({ ...faults }),
    stalled: () => stalled,
    open: () => pairs.size,
    async close() {
      for (const pair of [...pairs]) cut(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
