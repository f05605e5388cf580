/**
 * QUEUE_BACKEND=postgres: the event queue as one narrow table of Oncehook's own,
 * `"<QUEUE_PREFIX>_queue".ready` (queueSchemaFor), in the database of DATABASE_URL.
 *
 * A job is a row only while it waits:
 * - **enqueue** inserts it (`ON CONFLICT (id) DO NOTHING`: adding a job that waits already is a
 *   no-op, as adding a job id that exists is on BullMQ) and, in the same statement, notifies the
 *   workers once per statement (not per job), for the queues that got a job due now;
 * - **take** deletes as many due rows as the worker has free slots, in one statement
 *   (`FOR UPDATE SKIP LOCKED`: two workers never take the same row, and neither waits for the
 *   other), best priority first, then oldest (a `lifo` job is the newest first of its priority).
 *
 * Nothing else is written: no active, completed or failed state, no event stream, no retention.
 * That is all a queue has to carry here, because the events table is the record and its guarded
 * transitions are the guarantee (docs/architecture.md): a job taken by a worker that then dies
 * is not re-run by the queue but by the reconciler, which re-enqueues events never dispatched
 * and runs whose lease expired, as it does for a job Redis lost. A processor that throws before
 * a verdict (Postgres unreachable) has its job added back, delayed, up to QUEUE_JOB_ATTEMPTS
 * times, as BullMQ's attempts do on Redis; a dead letter is logged (the run row has the error).
 *
 * Why not BullMQ's own Postgres backend, which this replaced (docs/benchmarks.md): it writes
 * about 28 rows and 8 KB of WAL per event for its jobs, its event stream and its locks, which
 * made the Postgres path cost 1.4x graphile-worker's CPU per event; this table writes an insert
 * and a delete per job.
 */
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { createPool } from '@oncehook/shared';
import type { EventJobData, EventJobOptions } from './vocabulary.js';

/** How many times a job whose processor threw (before a verdict) runs before it is dropped to the reconciler. */
export const QUEUE_JOB_ATTEMPTS = 5;
/** The first retry's delay after a processor threw; doubled at each attempt (1, 2, 4, 8 s). */
export const QUEUE_RETRY_DELAY_MS = 1_000;
/**
 * An idle worker looks at the table at least this often: notifications wake it at once, and a
 * delayed job's due time is known, so this only bounds what a lost notification (the listening
 * connection cut) or a job left due while another worker held it can cost.
 */
export const QUEUE_IDLE_POLL_MS = 2_000;
/** An idle worker that saw a due row it could not take (another worker held it) looks again after this. */
const QUEUE_CONTENDED_POLL_MS = 100;
/** The most a count reads (getJobCounts, count): past it, the count says QUEUE_COUNT_CAP. */
export const QUEUE_COUNT_CAP = 100_000;

/** The store of one process: the pool every queue and worker of the process queries through. */
export interface PostgresQueueStore {
  readonly schema: string;
  readonly pool: pg.Pool;
  /** For the workers' LISTEN connections (one per worker, outside the pool). */
  readonly connectionString: string;
  /** The notification channel: the schema's name, so two prefixes never wake each other. */
  readonly channel: string;
  /** Resolves once the table exists (created at first use, under an advisory lock). */
  ready(): Promise<void>;
}

function tableOf(store: Pick<PostgresQueueStore, 'schema'>): string {
  return `${pg.escapeIdentifier(store.schema)}.ready`;
}

/**
 * The table. `ord` orders jobs of one priority: the enqueue's clock in microseconds, negated for
 * a `lifo` job (a freed flow slot's wake-up goes ahead of the waiting jobs). `run_at` is when a
 * delayed job becomes due. The take's index leads with the queue (one per shard) and the order.
 */
function tableDdl(schema: string): string {
  const table = `${pg.escapeIdentifier(schema)}.ready`;
  return `
    CREATE SCHEMA IF NOT EXISTS ${pg.escapeIdentifier(schema)};
    CREATE TABLE IF NOT EXISTS ${table} (
      id text PRIMARY KEY,
      queue text NOT NULL,
      data jsonb NOT NULL,
      priority integer NOT NULL DEFAULT 0,
      ord bigint NOT NULL,
      run_at timestamptz NOT NULL,
      added_at timestamptz NOT NULL DEFAULT now(),
      tries smallint NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS ready_take ON ${table} (queue, priority, ord);`;
}

export function openPostgresQueueStore(connectionString: string, schema: string, options: { poolSize: number; applicationName: string }): PostgresQueueStore {
  const pool = createPool(connectionString, { max: options.poolSize, applicationName: options.applicationName });
  let created: Promise<void> | undefined;
  return {
    schema,
    pool,
    connectionString,
    channel: schema,
    ready() {
      // Processes starting together create the table once: CREATE ... IF NOT EXISTS alone races
      // (two creators both pass the check; one fails on the catalog's unique index).
      created ??= (async () => {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          await client.query("SELECT pg_advisory_xact_lock(hashtext('oncehook-queue-ddl'), hashtext($1))", [schema]);
          await client.query(tableDdl(schema));
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK').catch(() => {});
          throw error;
        } finally {
          client.release();
        }
      })().catch((error: unknown) => {
        created = undefined; // the next caller tries again (Postgres was down at start)
        throw error;
      });
      return created;
    },
  };
}

export async function closePostgresQueueStore(store: PostgresQueueStore): Promise<void> {
  await store.pool.end();
}

/**
 * Insert on claim. The queue lives in the events' database here, so a claim batch's statement
 * inserts its new events' dispatch jobs into this table itself (CLAIM_EVENTS's `queued`, in
 * store/sql/claim.ts) and notifies the workers, as insertJobs does, at its own commit: a
 * delivery answered 202 always has its job (no window between the commit and an enqueue that a
 * crash could lose, which the reconciler had to close on REQUEUE_AFTER_MS), and ingest sends no
 * second statement per batch. What the claim statement needs of the queue, per input position:
 */
export interface ClaimJobs {
  /** The ready table, quoted: part of the statement's text (one text per table). */
  readonly table: string;
  readonly channel: string;
  /** Each event's job id, queue, and data without its row id (the insert gives it). */
  readonly ids: string[];
  readonly queues: string[];
  readonly datas: string[];
  /** The batch's enqueue clock (microseconds): a job's `ord` is this plus its position. */
  readonly ord: string;
}

/** The claim's jobs on a store (claimJobsFor in queue.ts routes and names them). */
export async function claimJobsOn(store: PostgresQueueStore, jobs: { id: string; queue: string; data: Omit<EventJobData, 'rowId'> }[]): Promise<ClaimJobs> {
  // The table exists before a claim writes into it (created at first use; one check after that).
  await store.ready();
  return {
    table: tableOf(store),
    channel: store.channel,
    ids: jobs.map((job) => job.id),
    queues: jobs.map((job) => job.queue),
    datas: jobs.map((job) => JSON.stringify(job.data)),
    ord: String(BigInt(Date.now()) * 1000n),
  };
}

/**
 * Inserts jobs, and notifies the workers of the queues that got a job due now: one statement.
 * The notification is sent at commit (this statement's own), so a woken worker finds the rows.
 */
async function insertJobs(store: PostgresQueueStore, queue: string, jobs: { data: EventJobData; opts: EventJobOptions }[], tries = 0): Promise<void> {
  if (jobs.length === 0) return;
  await store.ready();
  const nowMicros = BigInt(Date.now()) * 1000n;
  const ids: string[] = [];
  const datas: string[] = [];
  const priorities: number[] = [];
  const ords: string[] = [];
  const delays: number[] = [];
  jobs.forEach(({ data, opts }, i) => {
    ids.push(opts.jobId);
    datas.push(JSON.stringify(data));
    priorities.push(opts.priority ?? 0);
    const ord = nowMicros + BigInt(i);
    // mutant: pg-queue-lifo-ignored
    ords.push(String(opts.lifo ? -ord : ord));
    delays.push(Math.max(0, opts.delay ?? 0));
  });
  // mutant: pg-queue-add-not-idempotent
  await store.pool.query(
    `WITH added AS (
       INSERT INTO ${tableOf(store)} (id, queue, data, priority, ord, run_at, tries)
       SELECT id, $2, data, priority, ord, now() + delay * interval '1 millisecond', $7
         FROM unnest($1::text[], $3::jsonb[], $4::int[], $5::bigint[], $6::int[]) AS j(id, data, priority, ord, delay)
       ON CONFLICT (id) DO NOTHING
       RETURNING run_at)
     SELECT pg_notify($8, $2) FROM (SELECT 1 FROM added WHERE run_at <= now() LIMIT 1) due`,
    [ids, queue, datas, priorities, ords, delays, tries, store.channel],
  );
}

interface ReadyRow {
  id: string;
  data: EventJobData;
  added: number;
  run_at: number;
  priority: number;
  lifo: boolean;
  due: boolean;
}

/** A waiting job as the queue answers it (getJob, getJobs): the fields of BullMQ's Job that Oncehook reads. */
export interface PostgresQueuedJob {
  id: string;
  data: EventJobData;
  timestamp: number;
  opts: { priority?: number; delay?: number; lifo?: boolean };
  getState(): Promise<'waiting' | 'prioritized' | 'delayed'>;
  remove(): Promise<void>;
}

const READY_COLUMNS = `id, data, (extract(epoch FROM added_at) * 1000)::float8 AS added, (extract(epoch FROM run_at) * 1000)::float8 AS run_at,
  priority, ord < 0 AS lifo, run_at <= now() AS due`;

/**
 * One event queue (a shard) on the table: what ingest, the reconciler, retries and operator
 * actions call, with the names of BullMQ's Queue for what Oncehook uses of it (queue.ts's
 * EventQueue). A job a worker took is no longer a row: `active`, `completed` and `failed` count 0
 * here (the events view and the worker's metrics count them).
 */
export class PostgresEventQueue extends EventEmitter {
  constructor(
    /** The table's store (claimJobsFor reads its table and channel: insert on claim). */
    readonly store: PostgresQueueStore,
    readonly name: string,
  ) {
    super();
  }

  async waitUntilReady(): Promise<void> {
    await this.store.ready();
  }

  async add(_name: string, data: EventJobData, opts: EventJobOptions): Promise<void> {
    await insertJobs(this.store, this.name, [{ data, opts }]);
  }

  async addBulk(jobs: { name: string; data: EventJobData; opts: EventJobOptions }[]): Promise<void> {
    await insertJobs(this.store, this.name, jobs);
  }

  async getJob(id: string): Promise<PostgresQueuedJob | undefined> {
    const rows = await this.select('id = $2', [id]);
    return rows[0];
  }

  /**
   * Counts in BullMQ's names: `wait`/`waiting` the due jobs, `delayed` the others; the rest 0.
   * A count reads the queue's rows (Redis keeps counters; a table does not), so it stops at
   * QUEUE_COUNT_CAP: every process's gauge refresh and the jobs page stay a bounded read under
   * any backlog (a count at the cap means "at least").
   */
  async getJobCounts(...types: string[]): Promise<Record<string, number>> {
    await this.store.ready();
    const { rows } = await this.store.pool.query<{ due: number; delayed: number }>(
      `SELECT count(*) FILTER (WHERE due)::int AS due, count(*) FILTER (WHERE NOT due)::int AS delayed
         FROM (SELECT run_at <= now() AS due FROM ${tableOf(this.store)} WHERE queue = $1 LIMIT $2) capped`,
      [this.name, QUEUE_COUNT_CAP],
    );
    const { due, delayed } = rows[0] ?? { due: 0, delayed: 0 };
    const counts: Record<string, number> = {};
    for (const type of types.length > 0 ? types : ['waiting', 'delayed', 'active', 'completed', 'failed']) {
      counts[type] = type === 'wait' || type === 'waiting' ? due : type === 'delayed' ? delayed : 0;
    }
    return counts;
  }

  /**
   * The due (`wait`, `waiting`, `prioritized`) and/or `delayed` jobs by when they were added, as
   * BullMQ answers: newest first unless `asc` (the reconciler's oldest-waiting gauge asks for
   * the oldest). `nextJobs` lists them in the order a worker takes them.
   */
  async getJobs(types: string[] | string = ['waiting', 'delayed'], start = 0, end = -1, asc = false): Promise<PostgresQueuedJob[]> {
    const wanted = new Set(Array.isArray(types) ? types : [types]);
    const due = wanted.has('waiting') || wanted.has('wait') || wanted.has('prioritized');
    const delayed = wanted.has('delayed');
    if (!due && !delayed) return [];
    const limit = end < 0 ? null : end - start + 1;
    return this.select(`(($2 AND run_at <= now()) OR ($3 AND run_at > now())) ORDER BY added_at ${asc ? 'ASC' : 'DESC'}, id OFFSET $4 LIMIT $5`, [due, delayed, start, limit]);
  }

  /**
   * The next `limit` jobs a worker will take (due ones, best priority, then oldest: the take's
   * own index order, so a backlog of any size reads `limit` rows), then, when fewer are due, the
   * delayed ones by due time, among the first QUEUE_COUNT_CAP delayed rows read (a bounded read,
   * as the counts are: under a larger backlog of delayed jobs they are the soonest of those).
   * The jobs page's read (`npm run attack -- --scenario queue-page`).
   */
  async nextJobs(limit: number): Promise<PostgresQueuedJob[]> {
    // mutant: pg-queue-page-sorts-backlog
    const due = await this.select('run_at <= now() ORDER BY priority, ord LIMIT $2', [limit]);
    if (due.length >= limit) return due;
    const { rows } = await this.store.pool.query<ReadyRow>(
      `SELECT ${READY_COLUMNS} FROM (SELECT * FROM ${tableOf(this.store)} WHERE queue = $1 AND run_at > now() LIMIT $3) delayed ORDER BY run_at, priority, ord LIMIT $2`,
      [this.name, limit - due.length, QUEUE_COUNT_CAP],
    );
    return [...due, ...rows.map((row) => this.job(row))];
  }

  getDelayed(start = 0, end = -1): Promise<PostgresQueuedJob[]> {
    return this.getJobs(['delayed'], start, end);
  }

  /** Always empty: a dead letter is not kept in the queue here (its run row holds the error). */
  async getFailed(_start = 0, _end = -1): Promise<PostgresQueuedJob[]> {
    return [];
  }

  /** Jobs not yet taken, up to QUEUE_COUNT_CAP. */
  async count(): Promise<number> {
    await this.store.ready();
    const { rows } = await this.store.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM (SELECT 1 FROM ${tableOf(this.store)} WHERE queue = $1 LIMIT $2) capped`, [
      this.name,
      QUEUE_COUNT_CAP,
    ]);
    return rows[0]?.n ?? 0;
  }

  /**
   * The same queue read through another pool: the admin's jobs page reads through the admin's
   * own pool (its statement timeout, never the connections ingest enqueues through).
   */
  through(pool: pg.Pool): PostgresEventQueue {
    return new PostgresEventQueue({ ...this.store, pool, ready: () => this.store.ready() }, this.name);
  }

  async obliterate(_opts?: { force?: boolean }): Promise<void> {
    await this.store.ready();
    await this.store.pool.query(`DELETE FROM ${tableOf(this.store)} WHERE queue = $1`, [this.name]);
  }

  async close(): Promise<void> {
    // The store's pool is the connection's (closeQueueConnection ends it).
  }

  private async select(where: string, params: unknown[]): Promise<PostgresQueuedJob[]> {
    await this.store.ready();
    const { rows } = await this.store.pool.query<ReadyRow>(`SELECT ${READY_COLUMNS} FROM ${tableOf(this.store)} WHERE queue = $1 AND ${where}`, [this.name, ...params]);
    return rows.map((row) => this.job(row));
  }

  private job(row: ReadyRow): PostgresQueuedJob {
    const table = tableOf(this.store);
    const delay = Math.max(0, Math.round(row.run_at - row.added));
    return {
      id: row.id,
      data: row.data,
      timestamp: row.added,
      opts: { ...(row.priority ? { priority: row.priority } : {}), ...(delay > 0 ? { delay } : {}), ...(row.lifo ? { lifo: true } : {}) },
      getState: async () => (!row.due ? 'delayed' : row.priority ? 'prioritized' : 'waiting'),
      remove: async () => {
        await this.store.pool.query(`DELETE FROM ${table} WHERE id = $1 AND queue = $2`, [row.id, this.name]);
      },
    };
  }
}

/** A job as a processor gets it. */
export interface PostgresJob {
  id: string;
  data: EventJobData;
  /** Earlier attempts of this job whose processor threw (0 on the first). */
  attemptsMade: number;
}

export interface PostgresQueueWorkerOptions {
  concurrency: number;
  autorun?: boolean;
  /** QUEUE_IDLE_POLL_MS unless a test changes it. */
  idlePollMs?: number;
  /** QUEUE_RETRY_DELAY_MS unless a test shortens it. */
  retryDelayMs?: number;
}

interface TakenRow {
  id: string;
  data: EventJobData;
  tries: number;
  priority: number;
}

/**
 * Takes jobs of one queue and runs `processor` on each, `concurrency` at a time. Emits 'error'
 * (a take or a re-add that failed; the loop goes on), 'failed' (job, error) for a job dropped:
 * a dead letter (UnrecoverableError) or one whose attempts ran out, and 'completed' (job).
 *
 * The loop: take as many due jobs as there are free slots; when fewer came than asked, sleep
 * until a notification for this queue, the next delayed job's due time, or QUEUE_IDLE_POLL_MS;
 * when every slot is busy, sleep until one frees (the completions of one turn of the event loop
 * free their slots together, and one take fills them).
 */
export class PostgresQueueWorker<R = unknown> extends EventEmitter {
  private active = new Set<Promise<void>>();
  private closing = false;
  private running: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private listener: pg.Client | undefined;
  private listening: Promise<void> | undefined;
  private readonly idlePollMs: number;
  private readonly retryDelayMs: number;

  constructor(
    private readonly store: PostgresQueueStore,
    readonly name: string,
    private readonly processor: (job: PostgresJob) => Promise<R>,
    private readonly options: PostgresQueueWorkerOptions,
  ) {
    super();
    this.idlePollMs = options.idlePollMs ?? QUEUE_IDLE_POLL_MS;
    this.retryDelayMs = options.retryDelayMs ?? QUEUE_RETRY_DELAY_MS;
    if (options.autorun ?? true) void this.run().catch((error: unknown) => this.emit('error', error));
  }

  /** Resolves once the table exists and the worker listens for notifications. */
  async waitUntilReady(): Promise<void> {
    await this.store.ready();
    await this.listen();
  }

  /** Starts the loop (once); resolves when the worker is closed. */
  run(): Promise<void> {
    this.running ??= this.loop();
    return this.running;
  }

  /** Stops taking jobs, waits for the ones in flight, closes the listening connection. */
  async close(): Promise<void> {
    this.closing = true;
    this.wake?.();
    await this.running;
    while (this.active.size > 0) await Promise.all([...this.active]);
    await this.listener?.end().catch(() => {});
    this.listener = undefined;
  }

  /**
   * The LISTEN connection, outside the pool (a pooled connection would be handed to others). A
   * lost one is dropped and opened again by the next idle wait; meanwhile the poll covers.
   */
  private listen(): Promise<void> {
    if (this.listener || this.closing) return Promise.resolve();
    this.listening ??= (async () => {
      // A connect that hangs (a partition, a stopped server) gives up after 2 s, as the pool's
      // do: the loop then takes (and polls) without it, and listens again at its next turn.
      const client = new pg.Client({ connectionString: this.store.connectionString, application_name: 'oncehook-queue-listen', keepAlive: true, connectionTimeoutMillis: 2_000 });
      client.on('error', () => {
        if (this.listener === client) this.listener = undefined;
        void client.end().catch(() => {});
      });
      client.on('end', () => {
        if (this.listener === client) this.listener = undefined;
      });
      client.on('notification', (message) => {
        // mutant: pg-queue-notification-ignored
        if (message.payload === this.name) this.wake?.();
      });
      try {
        await client.connect();
        await client.query(`LISTEN ${pg.escapeIdentifier(this.store.channel)}`);
        this.listener = client;
      } catch (error) {
        void client.end().catch(() => {});
        throw error;
      }
    })().finally(() => {
      this.listening = undefined;
    });
    return this.listening;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  private async loop(): Promise<void> {
    let failures = 0;
    while (!this.closing) {
      const free = this.options.concurrency - this.active.size;
      if (free <= 0) {
        await Promise.race(this.active);
        // Let the completions of this turn free their slots too: one take fills them.
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      let taken: TakenRow[];
      let nextDueMs: number | null;
      try {
        await this.store.ready();
        // Listening before taking: a job added between the take and the sleep wakes it.
        await this.listen().catch((error: unknown) => this.emit('error', error));
        ({ taken, nextDueMs } = await this.take(free));
        failures = 0;
      } catch (error) {
        this.emit('error', error);
        failures += 1;
        await this.sleep(Math.min(200 * 2 ** failures, 5_000));
        continue;
      }
      for (const row of taken) this.start(row);
      if (taken.length < free && !this.closing) {
        const wait = nextDueMs === null ? this.idlePollMs : nextDueMs <= 0 ? QUEUE_CONTENDED_POLL_MS : Math.min(nextDueMs, this.idlePollMs);
        await this.sleep(wait);
      }
    }
  }

  /**
   * One statement: the due jobs of this queue, best first, deleted as they are taken (a row locked
   * by another worker's take is skipped, not waited for); and, for the idle wait, in how many ms
   * the next job left in the table is due (rows other workers are taking included: that case
   * reads as 0 or less and is polled again shortly).
   */
  private async take(limit: number): Promise<{ taken: TakenRow[]; nextDueMs: number | null }> {
    const table = tableOf(this.store);
    // The second part runs only when the take came up short (a one-time filter), so a worker
    // under a backlog does not scan the delayed rows at every take; it leaves out the rows this
    // statement took (they are still in its snapshot).
    // mutant: pg-queue-take-ignores-priority
    const { rows } = await this.store.pool.query<TakenRow & { next_due_ms: number | null }>(
      `WITH taken AS (
         DELETE FROM ${table} t
          USING (SELECT id FROM ${table} WHERE queue = $1 AND run_at <= now() ORDER BY priority, ord LIMIT $2 FOR UPDATE SKIP LOCKED) due
          WHERE t.id = due.id
          RETURNING t.id, t.data, t.tries, t.priority)
       SELECT id, data, tries, priority, NULL::float8 AS next_due_ms FROM taken
       UNION ALL
       SELECT NULL, NULL, NULL, NULL,
              (SELECT extract(epoch FROM min(run_at) - now()) * 1000 FROM ${table} WHERE queue = $1 AND id NOT IN (SELECT id FROM taken))::float8
        WHERE (SELECT count(*) FROM taken) < $2`,
      [this.name, limit],
    );
    const taken = rows.filter((row) => row.id !== null);
    const idle = rows.find((row) => row.id === null);
    return { taken, nextDueMs: idle?.next_due_ms ?? null };
  }

  private start(row: TakenRow): void {
    const job: PostgresJob = { id: row.id, data: row.data, attemptsMade: row.tries };
    const running = this.execute(job, row.priority).finally(() => {
      this.active.delete(running);
    });
    this.active.add(running);
  }

  private async execute(job: PostgresJob, priority: number): Promise<void> {
    try {
      await this.processor(job);
      this.emit('completed', job);
    } catch (error) {
      const attempts = job.attemptsMade + 1;
      const unrecoverable = error instanceof Error && error.name === 'UnrecoverableError';
      if (unrecoverable || attempts >= QUEUE_JOB_ATTEMPTS) {
        this.emit('failed', job, error);
        return;
      }
      // Thrown before a verdict (Postgres unreachable): the job again, later. If this add fails
      // too (Postgres still down), the reconciler re-enqueues the event or the run.
      // mutant: pg-queue-retry-dropped
      await insertJobs(this.store, this.name, [{ data: job.data, opts: { jobId: job.id, delay: this.retryDelayMs * 2 ** job.attemptsMade, priority } }], attempts).catch(
        (addError: unknown) => this.emit('error', addError),
      );
    }
  }
}
