/**
 * The outbound guard (packages/shared/src/outbound/): every form of a link-local or metadata
 * address refused, checked where the connection is made (a resolver that answers a public
 * address and then 169.254.x: the second call is refused before connecting; TLS still verifies
 * the host name), redirects under the policy, origins pinned, answers bounded.
 *
 * A refused address must fail with OutboundRefusedError before any connection: without the
 * guard the same calls fail differently (ECONNREFUSED, a timeout), so these tests tell.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { addressProblem, OutboundRefusedError, outboundFetch, outboundUrlProblem, refusedAddress, type Resolver } from '@oncehook/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

async function serve(handler: Handler, server: Server = createHttpServer()): Promise<{ url: string; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const scheme = 'setSecureContext' in server ? 'https' : 'http';
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A resolver that maps names to addresses, changing its answer from call to call when given a list. */
function resolver(answers: Record<string, string[][]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    const list = answers[hostname];
    if (!list) throw Object.assign(new Error(`no such host ${hostname}`), { code: 'ENOTFOUND' });
    const answer = list.length > 1 ? list.shift()! : list[0]!;
    return answer.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { calls });
}

const refusal = async (promise: Promise<unknown>) => {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  // fetch wraps a connector's error as its cause.
  const cause = (error as { cause?: unknown } | null)?.cause ?? error;
  return cause;
};

describe('addresses', () => {
  it('refuses link-local, unspecified and metadata addresses in every IPv4-in-IPv6 form', () => {
    const refused = [
      '169.254.169.254',
      '169.254.0.1',
      '0.0.0.0',
      '0.1.2.3',
      '::',
      'fe80::1',
      'febf::1',
      '100.100.100.200',
      '192.0.0.192',
      '168.63.129.16',
      'fd00:ec2::254',
      // The URL parser's spelling of [::ffff:169.254.169.254], the finding itself.
      new URL('http://[::ffff:169.254.169.254]/').hostname,
      '::ffff:a9fe:a9fe',
      '::ffff:0:0',
      '::a9fe:a9fe',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::169.254.169.254',
      '64:ff9b:1:a9fe:a9:fe00::',
      '64:ff9b:1::a9fe:a9fe',
      '2002:a9fe:a9fe::1',
      // Teredo: server 65.54.227.120, client 169.254.169.254 (stored inverted).
      '2001:0:4136:e378:8000:63bf:5601:5601',
      '2001:0:a9fe:a9fe::1',
      '64:ff9b::6464:64c8',
    ];
    for (const address of refused) expect(refusedAddress(address), address).not.toBeNull();
    const allowed = ['127.0.0.1', '10.0.0.7', '192.168.1.1', '8.8.8.8', '::1', '2001:db8::1', '64:ff9b::808:808', '2002:808:808::1', 'fd00::1', 'not-an-address'];
    for (const address of allowed) expect(refusedAddress(address), address).toBeNull();
    expect(refusedAddress('64:ff9b::a9fe:a9fe')).toEqual({ class: 'link-local', embedded: '169.254.169.254' });
    expect(addressProblem('metadata.internal', '169.254.169.254')).toMatch(/metadata\.internal resolves to 169\.254\.169\.254, a link-local address/);
  });

  it('checks a URL before start, through the resolver, and lets allowLinkLocal through', async () => {
    const resolve = resolver({ 'api.oncehook.test': [['127.0.0.1']], 'meta.oncehook.test': [['10.0.0.1', '169.254.169.254']] });
    expect(await outboundUrlProblem(new URL('http://api.oncehook.test/'), { resolve })).toBeNull();
    expect(await outboundUrlProblem(new URL('http://meta.oncehook.test/'), { resolve })).toMatch(/meta\.oncehook\.test resolves to 169\.254\.169\.254/);
    expect(await outboundUrlProblem(new URL('http://[64:ff9b::a9fe:a9fe]/'), {})).toMatch(/carries the IPv4 address 169\.254\.169\.254/);
    expect(await outboundUrlProblem(new URL('http://[64:ff9b::a9fe:a9fe]/'), { allowLinkLocal: true })).toBeNull();
  });
});

describe('at connect time', () => {
  let target: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    target = await serve((_req, res) => {
      res.setHeader('connection', 'close');
      res.end('ok');
    });
  });
  afterAll(() => target.close());

  it('refuses an address written in the URL in any form, before connecting', async () => {
    for (const host of ['169.254.169.254', '[::ffff:169.254.169.254]', '[::ffff:a9fe:a9fe]', '[64:ff9b::a9fe:a9fe]', '0.0.0.0', '[::]']) {
      const cause = await refusal(outboundFetch(`http://${host}/`, { method: 'POST', body: '{}' }));
      expect(cause, host).toBeInstanceOf(OutboundRefusedError);
      expect((cause as OutboundRefusedError).reason).toBe('address');
    }
  });

  it('a name that resolves to a public address, then to 169.254.169.254: the second call is refused where it connects', async () => {
    const port = new URL(target.url).port;
    const resolve = resolver({ 'rebind.oncehook.test': [['127.0.0.1'], ['169.254.169.254']] });
    const first = await outboundFetch(`http://rebind.oncehook.test:${port}/`, { policy: { resolve } });
    expect(first.status).toBe(200);
    await first.text();
    const before = target.seen.length;
    // The server closes every connection after its answer: the second call connects again.
    const cause = await refusal(outboundFetch(`http://rebind.oncehook.test:${port}/again`, { policy: { resolve } }));
    expect(cause).toBeInstanceOf(OutboundRefusedError);
    expect((cause as OutboundRefusedError).reason).toBe('address');
    expect(resolve.calls).toEqual(['rebind.oncehook.test', 'rebind.oncehook.test']);
    expect(target.seen.length).toBe(before);
  });

  it('one lookup per connection, and a name answering a public and a metadata address is refused', async () => {
    const port = new URL(target.url).port;
    const resolve = resolver({ 'fresh.oncehook.test': [['169.254.169.254']], 'both.oncehook.test': [['127.0.0.1', '169.254.169.254']] });
    const fresh = await refusal(outboundFetch(`http://fresh.oncehook.test:${port}/`, { policy: { resolve } }));
    expect(fresh).toBeInstanceOf(OutboundRefusedError);
    const both = await refusal(outboundFetch(`http://both.oncehook.test:${port}/`, { policy: { resolve } }));
    expect(both).toBeInstanceOf(OutboundRefusedError);
    expect(resolve.calls).toEqual(['fresh.oncehook.test', 'both.oncehook.test']);
    // allowLinkLocal lets the same name through (to 127.0.0.1 here: the resolver is not consulted).
    const open = await outboundFetch(`http://127.0.0.1:${port}/`, { policy: { allowLinkLocal: true } });
    expect(open.status).toBe(200);
  });

  it('TLS verifies the host name while the connection goes to the checked address; https -> http is not followed', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'oncehook-tls-'));
    try {
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          path.join(dir, 'key.pem'),
          '-out',
          path.join(dir, 'cert.pem'),
          '-days',
          '2',
          '-subj',
          '/CN=api.oncehook.test',
          '-addext',
          'subjectAltName=DNS:api.oncehook.test',
        ],
        { stdio: 'ignore' },
      );
      const cert = readFileSync(path.join(dir, 'cert.pem'));
      const plain = await serve((_req, res) => res.end('plain'));
      const tls = await serve(
        (req, res) => {
          if (req.url === '/downgrade') return res.writeHead(307, { location: `${plain.url}/` }).end();
          res.end('secure');
        },
        createHttpsServer({ cert, key: readFileSync(path.join(dir, 'key.pem')) }),
      );
      try {
        const port = new URL(tls.url).port;
        const resolve = resolver({ 'api.oncehook.test': [['127.0.0.1']], 'evil.oncehook.test': [['169.254.169.254']] });
        const ok = await outboundFetch(`https://api.oncehook.test:${port}/`, { policy: { resolve, ca: cert } });
        expect(await ok.text()).toBe('secure');
        // The same server by its address: the certificate does not name it, so TLS refuses.
        const byAddress = await refusal(outboundFetch(`https://127.0.0.1:${port}/`, { policy: { resolve, ca: cert } }));
        expect(String((byAddress as Error).message)).toMatch(/altnames|IP: 127\.0\.0\.1|certificate/i);
        const evil = await refusal(outboundFetch(`https://evil.oncehook.test:${port}/`, { policy: { resolve, ca: cert } }));
        expect(evil).toBeInstanceOf(OutboundRefusedError);
        // A redirect from https to http is not followed: the request would go unencrypted.
        const downgrade = await refusal(
          outboundFetch(`https://api.oncehook.test:${port}/downgrade`, { method: 'POST', body: '{}', followRedirects: true, policy: { resolve, ca: cert } }),
        );
        expect((downgrade as OutboundRefusedError).message).toMatch(/from https to http/);
        expect(plain.seen).toHaveLength(0);
      } finally {
        await tls.close();
        await plain.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('redirects, origins and sizes', () => {
  let other: Awaited<ReturnType<typeof serve>>;
  let origin: Awaited<ReturnType<typeof serve>>;
  beforeAll(async () => {
    other = await serve((_req, res) => res.end('elsewhere'));
    origin = await serve((req, res) => {
      const to = (status: number, location: string) => {
        res.writeHead(status, { location });
        res.end();
      };
      const route = req.url ?? '';
      if (route === '/found') return to(302, '/landing');
      if (route === '/temporary') return to(307, '/landing');
      if (route === '/permanent') return to(308, `${other.url}/moved`);
      if (route === '/metadata') return to(307, 'http://169.254.169.254/latest/meta-data/');
      if (route === '/metadata-v6') return to(307, 'http://[::ffff:a9fe:a9fe]/latest/meta-data/');
      if (route.startsWith('/loop/')) return to(307, `/loop/${Number(route.slice(6)) + 1}`);
      if (route === '/big') {
        // Chunked: no declared length, the bound applies while reading.
        res.write('x'.repeat(50_000));
        return res.end('x'.repeat(50_000));
      }
      if (route === '/big-declared') {
        res.writeHead(200, { 'content-length': String(1_000_000) });
        return res.end('x'.repeat(1_000_000));
      }
      res.end('landed');
    });
  });
  afterAll(async () => {
    await origin.close();
    await other.close();
  });

  const post = (route: string, extra: Parameters<typeof outboundFetch>[1] = {}) =>
    outboundFetch(`${origin.url}${route}`, {
      method: 'POST',
      body: '{"n":1}',
      headers: { 'x-api-key': 'key-secret-123', 'content-type': 'application/json' },
      followRedirects: true,
      ...extra,
    });

  it('a 302 to a POST is not followed (it would become a GET); 307 keeps the method and the body', async () => {
    const found = await refusal(post('/found'));
    expect(found).toBeInstanceOf(OutboundRefusedError);
    expect((found as Error).message).toMatch(/answered 302 .*only 307 and 308 keep it/);
    const temporary = await post('/temporary');
    expect(await temporary.text()).toBe('landed');
    const landed = origin.seen.filter((s) => s.url === '/landing');
    expect(landed.at(-1)).toMatchObject({ method: 'POST', body: '{"n":1}' });
    expect(landed.at(-1)!.headers['x-api-key']).toBe('key-secret-123');
  });

  it('a redirect that leaves the origin drops the secret headers', async () => {
    const moved = await post('/permanent', { originHeaders: ['x-api-key'] });
    expect(await moved.text()).toBe('elsewhere');
    const there = other.seen.at(-1)!;
    expect(there.method).toBe('POST');
    expect(there.headers['x-api-key']).toBeUndefined();
    expect(JSON.stringify(there.headers)).not.toContain('key-secret-123');
  });

  it('a redirect towards link-local, in any form, is refused at its hop', async () => {
    for (const route of ['/metadata', '/metadata-v6']) {
      const cause = await refusal(post(route));
      expect(cause, route).toBeInstanceOf(OutboundRefusedError);
      expect((cause as OutboundRefusedError).reason).toBe('address');
    }
  });

  it('at most 5 hops are followed', async () => {
    const before = origin.seen.length;
    const cause = await refusal(post('/loop/0'));
    expect((cause as Error).message).toMatch(/more than 5 redirects/);
    expect(origin.seen.length - before).toBe(6);
  });

  it('without followRedirects a 3xx is the answer', async () => {
    const answer = await post('/found', { followRedirects: false });
    expect(answer.status).toBe(302);
  });

  it('allowedOrigins: a URL on another origin is refused unsent', async () => {
    const before = other.seen.length;
    const cause = await refusal(outboundFetch(`${other.url}/next?after=x`, { headers: { authorization: 'Bearer key' }, allowedOrigins: [origin.url] }));
    expect((cause as OutboundRefusedError).reason).toBe('origin');
    expect(other.seen.length).toBe(before);
    const hop = await refusal(post('/permanent', { allowedOrigins: [origin.url] }));
    expect((hop as OutboundRefusedError).reason).toBe('origin');
    expect(other.seen.length).toBe(before);
  });

  it('maxResponseBytes: a larger answer fails to read, declared or not', async () => {
    const streamed = await outboundFetch(`${origin.url}/big`, { maxResponseBytes: 10_000 });
    const cause = await refusal(streamed.text());
    expect(cause).toBeInstanceOf(OutboundRefusedError);
    const declared = await refusal(outboundFetch(`${origin.url}/big-declared`, { maxResponseBytes: 10_000 }));
    expect((declared as OutboundRefusedError).reason).toBe('too-large');
    const fits = await outboundFetch(`${origin.url}/big`, { maxResponseBytes: 200_000 });
    expect((await fits.text()).length).toBe(100_000);
  });
});
