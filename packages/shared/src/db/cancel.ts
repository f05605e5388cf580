/**
 * Cancelling a statement from outside its connection: Postgres's CancelRequest, sent on a
 * connection of its own that carries nothing else (it takes no backend and no pool slot; the
 * server closes it). What the admin does when the client of a search goes away: the search
 * stops in Postgres instead of running to its timeout. Best effort: a server that refuses the
 * request (a `hostssl`-only pg_hba) leaves the statement to its statement_timeout.
 */
import pg from 'pg';

interface BackendKey {
  processID?: number;
  secretKey?: number;
  connectionParameters?: { host?: string; port?: number };
}

/** Sends a cancel request for whatever `client` is running now; resolves once it was sent (or could not be). */
export function cancelStatement(client: pg.ClientBase): Promise<void> {
  const { processID, secretKey, connectionParameters } = client as unknown as BackendKey;
  if (processID === undefined || secretKey === undefined || !connectionParameters?.port) return Promise.resolve();
  const host = connectionParameters.host ?? '127.0.0.1';
  const port = connectionParameters.port;
  return new Promise((resolve) => {
    const connection = new pg.Connection() as pg.Connection & {
      connect(port: number | string, host?: string): void;
      cancel(processID: number, secretKey: number): void;
      stream: { destroy(): void };
    };
    const timer = setTimeout(finish, 2_000);
    function finish(): void {
      clearTimeout(timer);
      connection.stream.destroy();
      resolve();
    }
    connection.on('error', finish);
    connection.on('end', finish);
    connection.on('connect', () => connection.cancel(processID, secretKey));
    if (host.startsWith('/')) connection.connect(`${host}/.s.PGSQL.${port}`);
    else connection.connect(port, host);
  });
}

/** Cancels the statement `client` is running when `signal` aborts; returns the function that stops watching. */
export function cancelOnAbort(client: pg.ClientBase, signal: AbortSignal | undefined): () => void {
  if (!signal) return () => {};
  const onAbort = () => void cancelStatement(client);
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}
