/**
 * A stand-in for the API your handler calls, for your tests (the test kit's startStandInApi) and
 * for `oncehook dev --stand-in VAR` (a first event runs end to end before your API exists): a
 * real HTTP server on 127.0.0.1
 * that behaves the way APIs with idempotency keys behave (Stripe's rules), records every
 * request, and fails on demand. Point your handler's setting at `api.url` and run
 * `checkHandler`: no server of your own to write, and nothing reaches a real API.
 *
 *   const api = await startStandInApi({ answer: (request) => ({ id: `ntf_${request.n}` }) });
 *   process.env.NOTIFY_API_URL = api.url;
 *   ... checkHandler(...) ...
 *   expect(api.effects()).toHaveLength(1);   // applied once, however many attempts
 *   await api.close();
 *
 * The rules, per request:
 * - with an idempotency key (the `Idempotency-Key` header, or `keyHeader`): the first request
 *   is applied (an effect is recorded) and its answer stored; a later request with the same key
 *   gets the same answer again (`Idempotent-Replayed: true`), nothing applied; the same key
 *   while the first is still being answered: 409; the same key with another body: 400;
 * - without a key: applied every time (what at-least-once means at the other end);
 * - `failNext({ count, status })`: the next `count` requests are answered `status` (default
 *   503) without applying (a retry with the key applies); `failNext({ afterApply: true })`:
 *   applied and stored, then the connection is dropped before the answer (the caller never
 *   hears of it; its retry with the same key gets the stored answer).
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export interface StandInRequest {
  /** 1 for the first request the API received, then 2, 3, ... */
  n: number;
  method: string;
  path: string;
  /** The idempotency key it carried, or null. */
  key: string | null;
  /** The body as text, and parsed when it is JSON. */
  body: string;
  json: unknown;
  headers: Record<string, string | string[] | undefined>;
}

export interface StandInEffect {
  key: string | null;
  request: StandInRequest;
  /** What the API answered (the stored answer a repeat of the key gets). */
  answer: { status: number; body: unknown };
}

export interface StandInApiOptions {
  /** The answer's JSON body for an applied request (default `{ id: 'stand_in_<n>' }`), or `{ status, body }`. */
  answer?: (request: StandInRequest) => unknown | { status: number; body: unknown };
  /** The header that carries the idempotency key (default `Idempotency-Key`). */
  keyHeader?: string;
  /** How long each applied request takes to answer, ms (default 0). */
  delayMs?: number;
  /** Where it listens (default 0: a free port). */
  port?: number;
  /** Called with each request and what it was answered (oncehook dev prints it). */
  onAnswer?: (request: StandInRequest, answer: { status: number; replayed: boolean }) => void;
}

export interface StandInApi {
  /** `http://127.0.0.1:<port>`: point your handler's setting at it. */
  readonly url: string;
  /** Every request received, in order. */
  readonly requests: StandInRequest[];
  /** The effects applied: one per key (and one per keyless request). */
  effects(): StandInEffect[];
  /** Requests answered from a stored answer (a repeated key). */
  replays(): number;
  /** The next `count` requests fail (see the header). */
  failNext(options?: { count?: number; status?: number; afterApply?: boolean }): void;
  /** Forgets every request, effect, stored answer and pending failure. */
  reset(): void;
  close(): Promise<void>;
}

const isAnswer = (value: unknown): value is { status: number; body: unknown } =>
  typeof value === 'object' && value !== null && 'status' in value && typeof (value as { status: unknown }).status === 'number' && 'body' in value;

export async function startStandInApi(options: StandInApiOptions = {}): Promise<StandInApi> {
  const keyHeader = (options.keyHeader ?? 'Idempotency-Key').toLowerCase();
  let requests: StandInRequest[] = [];
  let effects: StandInEffect[] = [];
  let replays = 0;
  let stored = new Map<string, { fingerprint: string; state: 'in-flight' | 'done'; answer?: { status: number; body: unknown } }>();
  let failures: { status: number; afterApply: boolean }[] = [];

  const answerWith = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };

  async function handle(req: IncomingMessage, res: ServerResponse, text: string): Promise<void> {
    const header = req.headers[keyHeader];
    const key = typeof header === 'string' && header !== '' ? header : null;
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    const request: StandInRequest = { n: requests.length + 1, method: req.method ?? 'GET', path: req.url ?? '/', key, body: text, json, headers: req.headers };
    requests.push(request);
    const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void => {
      answerWith(res, status, body, headers);
      options.onAnswer?.(request, { status, replayed: headers['idempotent-replayed'] === 'true' });
    };
    const fingerprint = createHash('sha256').update(`${request.method} ${request.path}\0${text}`).digest('hex');
    const failure = failures.shift();
    if (failure && !failure.afterApply) return send(res, failure.status, { error: 'stand-in failure (failNext)' });

    if (key !== null) {
      const previous = stored.get(key);
      if (previous?.fingerprint !== undefined && previous.fingerprint !== fingerprint) {
        return send(res, 400, { error: 'idempotency_key_reused', message: 'this key was used with another request' });
      }
      if (previous?.state === 'in-flight') return send(res, 409, { error: 'idempotency_key_in_use', message: 'a request with this key is still being answered' });
      if (previous?.state === 'done' && previous.answer) {
        replays += 1;
        return send(res, previous.answer.status, previous.answer.body, { 'idempotent-replayed': 'true' });
      }
      stored.set(key, { fingerprint, state: 'in-flight' });
    }
    if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
    const produced = options.answer ? options.answer(request) : { id: `stand_in_${request.n}` };
    const answer = isAnswer(produced) ? produced : { status: 200, body: produced };
    effects.push({ key, request, answer });
    if (key !== null) stored.set(key, { fingerprint, state: 'done', answer });
    if (failure?.afterApply) {
      // Applied and stored; the caller never hears of it.
      res.socket?.destroy();
      return;
    }
    send(res, answer.status, answer.body);
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks).toString('utf8')).catch((error: unknown) => answerWith(res, 500, { error: 'stand-in error', message: String(error) }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as { port: number };

  return {
    url: `http://127.0.0.1:${port}`,
    get requests() {
      return requests;
    },
    effects: () => [...effects],
    replays: () => replays,
    failNext({ count = 1, status = 503, afterApply = false } = {}) {
      for (let i = 0; i < count; i += 1) failures.push({ status, afterApply });
    },
    reset() {
      requests = [];
      effects = [];
      replays = 0;
      stored = new Map();
      failures = [];
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
