/**
 * A TCP proxy of the harness between a process and a server (Postgres, Redis, a replica's
 * link to its primary), for the faults a network makes and `tc netem` cannot make here (no
 * kernel module):
 *   - `pointAt(port)`: new connections go to another server, the open ones are cut, as a cloud
 *     database endpoint moves to a promoted replica;
 *   - `stall()` / `resume()`: bytes stop flowing both ways while every socket stays open (the
 *     classic stuck connection: no error, no answer), then flow again;
 *   - `reset()`: every open connection reset (RST), as a middlebox dropping its state.
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
  /** Connections open now. */
  open(): number;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  server: net.Socket;
}

/** Starts a proxy on a free port of 127.0.0.1 forwarding to 127.0.0.1:`targetPort`. */
export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  let stalled = false;
  const pairs = new Set<Pair>();

  const cut = (pair: Pair) => {
    pairs.delete(pair);
    pair.client.resetAndDestroy();
    pair.server.resetAndDestroy();
  };

  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: target });
    const pair: Pair = { client, server: upstream };
    pairs.add(pair);
    if (stalled) {
      client.pause();
      upstream.pause();
    }
    // Forwarded by hand rather than with pipe(): pipe() resumes a paused source when its
    // destination drains, which would end a stall.
    const forward = (from: net.Socket, to: net.Socket) => {
      from.on('data', (chunk) => {
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => {
            if (!stalled) from.resume();
          });
        }
      });
      from.on('end', () => to.end());
    };
    forward(client, upstream);
    forward(upstream, client);
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
      for (const { client, server: upstream } of pairs) {
        client.resume();
        upstream.resume();
      }
    },
    reset() {
      for (const pair of [...pairs]) cut(pair);
    },
    open: () => pairs.size,
    async close() {
      for (const pair of [...pairs]) cut(pair);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
