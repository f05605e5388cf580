/**
 * The harness's TCP proxy (packages/harness/src/tcp-proxy.ts), which the failover test and the
 * chaos run's network faults stand on: each fault does what it says against a real echo server.
 * Only lower bounds on delays (a loaded machine is slower, never faster).
 */
import net from 'node:net';
import { startTcpProxy, type TcpProxy } from '@oncehook/harness';
import { afterEach, expect, it } from 'vitest';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** An echo server that prefixes each reply with its name. */
async function echo(name: string): Promise<number> {
  const server = net.createServer((socket) => {
    socket.on('data', (chunk) => socket.write(`${name}:${chunk.toString()}`));
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

async function proxyTo(port: number): Promise<TcpProxy> {
  const proxy = await startTcpProxy(port);
  closers.push(() => proxy.close());
  return proxy;
}

/** A client whose received text and end (close or error code) the test reads. */
async function connect(port: number): Promise<{ socket: net.Socket; received: () => string; ended: () => string | null }> {
  const socket = net.connect({ host: '127.0.0.1', port });
  let text = '';
  let ended: string | null = null;
  socket.on('data', (chunk) => (text += chunk.toString()));
  socket.on('error', (error: NodeJS.ErrnoException) => (ended = error.code ?? 'error'));
  socket.on('close', () => (ended ??= 'closed'));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  closers.push(async () => void socket.destroy());
  return { socket, received: () => text, ended: () => ended };
}

const until = async (check: () => boolean, what: string) => {
  const deadline = Date.now() + 5_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

it('forwards both ways; latency delays every trip by at least its amount', async () => {
  const proxy = await proxyTo(await echo('a'));
  const client = await connect(proxy.port);
  client.socket.write('1');
  await until(() => client.received() === 'a:1', 'the echo');
  proxy.setFaults({ latencyMs: 100, jitterMs: 20 });
  const sent = performance.now();
  client.socket.write('2');
  await until(() => client.received() === 'a:1a:2', 'the delayed echo');
  // Both ways: at least 200 ms.
  expect(performance.now() - sent).toBeGreaterThanOrEqual(195);
});

it('a bandwidth limit spreads a transfer over its bytes per second', async () => {
  const proxy = await proxyTo(await echo('b'));
  proxy.setFaults({ bytesPerSecond: 100_000 });
  const client = await connect(proxy.port);
  const sent = performance.now();
  client.socket.write('x'.repeat(50_000));
  await until(() => client.received().length >= 50_002, 'the 50 KB echo');
  // 50 KB each way at 100 KB/s: at least 0.5 s each way (chunks may overlap the two ways).
  expect(performance.now() - sent).toBeGreaterThanOrEqual(490);
});

it('a stall stops every byte while the sockets stay open; resume delivers what waited, in order', async () => {
  const proxy = await proxyTo(await echo('c'));
  const client = await connect(proxy.port);
  proxy.stall();
  client.socket.write('1');
  client.socket.write('2');
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(client.received()).toBe('');
  expect(client.ended()).toBeNull();
  expect(proxy.open()).toBe(1);
  // A connection opened during the stall is stalled too.
  const late = await connect(proxy.port);
  late.socket.write('3');
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(late.received()).toBe('');
  proxy.resume();
  await until(() => client.received().replaceAll('c:', '') === '12' && late.received() === 'c:3', 'the echoes after the resume');
});

it('reset cuts every open connection; pointAt cuts them and sends new ones to the other server', async () => {
  const proxy = await proxyTo(await echo('old'));
  const first = await connect(proxy.port);
  proxy.reset();
  await until(() => first.ended() !== null, 'the reset');
  expect(first.ended()).toBe('ECONNRESET');
  const second = await connect(proxy.port);
  second.socket.write('x');
  await until(() => second.received() === 'old:x', 'the echo from the first server');
  proxy.pointAt(await echo('new'));
  await until(() => second.ended() !== null, 'the cut');
  const third = await connect(proxy.port);
  third.socket.write('y');
  await until(() => third.received() === 'new:y', 'the echo from the second server');
});
