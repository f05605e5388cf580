import net from 'node:net';

/** A TCP port that was free a moment ago (the OS picks it). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Whether a failed fetch is a reset of its connection before any answer arrived. */
function connectionReset(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } })?.cause;
  return error instanceof TypeError && (cause?.code === 'ECONNRESET' || cause?.code === 'UND_ERR_SOCKET');
}

/**
 * POSTs a delivery the way the tests do, retrying ONCE a connection reset before any answer:
 * fetch reuses an idle keep-alive connection just as the server closes it (its keep-alive
 * timeout), which a loaded machine's late timers make likely. Nothing was answered, so nothing
 * was acknowledged; a provider retries such a delivery too (and a delivery that did reach the
 * server would come back as a duplicate, which the test would see).
 */
/**
 * One webhook request as the test support sends it: the raw body and its headers (signed or
 * not). The one request shape of the harness; a provider's signer adds the stored id
 * (@oncehook/shared's SignedDelivery).
 */
export interface Delivery {
  body: string | Buffer;
  headers: Record<string, string>;
}

export async function postDelivery(url: string, init: Delivery): Promise<Response> {
  try {
    return await fetch(url, { method: 'POST', ...init });
  } catch (error) {
    if (!connectionReset(error)) throw error;
    return fetch(url, { method: 'POST', ...init });
  }
}
