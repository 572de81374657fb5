// Bounded reads on SQLite: searches run on a small pool of worker threads, each with its own read-only
// connection (WAL lets readers run beside the writer, each on a consistent snapshot), so that a long
// search never holds the event loop: /healthz, reads by id and writes go on meanwhile.
//
// A search past its time budget (or whose client went away) is stopped for real: better-sqlite3 runs a
// statement inside one native call, and is built without SQLite's progress callback, so a timer or
// Worker.terminate() only takes effect once the statement has finished on its own. The pool therefore
// loads a tiny SQLite extension (native/sqlite-interrupt.c, built by `npm install`) and calls
// sqlite3_interrupt() on the worker's connection from the main thread; the statement fails with
// SQLITE_INTERRUPT within microseconds and the worker takes the next job. (Terminating the thread is
// no way out: better-sqlite3 then aborts the whole process when the statement returns into a dying
// isolate.) Where the extension could not be built, the client still gets its answer at the deadline
// and the event loop stays free, but the statement runs to its end on its worker, which takes no other
// search meanwhile (docs/security.md).
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import type { Database as SqliteConnection, Statement } from 'better-sqlite3';
import { budgetLeft, BudgetExceededError } from '../sql/database.js';
import type { ReadBudget, Row, SqlValue } from '../sql/database.js';
import type { ByteLru } from '../sql/byte-lru.js';
import { startWorker } from '../../workers/start-worker.js';
import type { ReadRequest, ReadWorkerData, ReadWorkerMessage } from './read-worker.js';
import { preparedStatementBytes, statementCache } from './statement-cache.js';

/**
 * sqlite3_interrupt() stops only a statement that is running: one that starts just after it (the job
 * was on its way to the worker) is interrupted by the next attempt, this often, until the worker answers.
 */
const INTERRUPT_RETRY_MS = 20;

/** The interrupt extension `npm install` builds (scripts/build-native.mjs), if it could. */
export function interruptExtensionPath(): string | undefined {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
  for (const suffix of ['so', 'dylib', 'dll']) {
    const file = join(root, 'generated', `sqlite-interrupt.${suffix}`);
    if (existsSync(file)) return file;
  }
  return undefined;
}

interface Job {
  readonly id: number;
  readonly text: string;
  readonly params: readonly SqlValue[];
  readonly budget: ReadBudget;
  resolve(rows: Row[]): void;
  reject(error: unknown): void;
  settled: boolean;
  timer?: NodeJS.Timeout;
  onAbort?: () => void;
}

interface ReadWorker {
  readonly thread: Worker;
  /** The SQL texts the worker keeps prepared, as the main thread tells it to (statement-cache.ts). */
  readonly statements: ByteLru<true>;
  /** The connection's sqlite3 pointer, for sqlite3_interrupt(); undefined without the extension. */
  handle: bigint | undefined;
  ready: boolean;
  job: Job | undefined;
  /** Its job was stopped; it takes no new job until the statement has answered. */
  stopping: boolean;
  /** Repeats the interrupt until the stopped statement answers. */
  retry?: NodeJS.Timeout;
  /** Called once the worker answers its current job (close() waits for it). */
  onIdle?: () => void;
}

export interface ReadPoolStats {
  readonly workers: number;
  readonly busy: number;
  readonly queued: number;
  /** Workers still finishing a statement that was stopped (without the extension: running to its end). */
  readonly stopping: number;
  /** Stopped by sqlite3_interrupt (true) or by terminating the thread (false). */
  readonly interrupts: boolean;
}

export class SqliteReadPool {
  private readonly workers: ReadWorker[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  private readonly interrupter: SqliteConnection | undefined;
  /** `SELECT ambient_interrupt(?)` on the interrupter, prepared once. */
  private readonly interruptStatement: Statement | undefined;
  private readonly extension: string | undefined;

  /** `extension: false` stops overrunning statements by ending their thread (tests of that fallback). */
  constructor(
    private readonly fileName: string,
    private readonly size: number,
    options: { extension?: string | false } = {},
  ) {
    const extension = options.extension === false ? undefined : (options.extension ?? interruptExtensionPath());
    this.extension = extension;
    if (extension) {
      try {
        const connection = new BetterSqlite3(':memory:');
        // The typings lack the entry point argument better-sqlite3 takes.
        (connection as unknown as { loadExtension(file: string, entryPoint: string): void }).loadExtension(
          extension,
          'sqlite3_ambientinterrupt_init',
        );
        this.interrupter = connection;
        this.interruptStatement = connection.prepare('SELECT ambient_interrupt(?)');
      } catch (error) {
        process.emitWarning(
          `SQLite interrupt extension not loaded (${(error as Error).message}); long searches are stopped by ending their thread`,
        );
        this.extension = undefined;
      }
    }
  }

  stats(): ReadPoolStats {
    return {
      workers: this.workers.length,
      busy: this.workers.filter((w) => w.job || w.stopping).length,
      queued: this.queue.length,
      stopping: this.workers.filter((w) => w.stopping).length,
      interrupts:
        this.interruptStatement !== undefined && this.workers.every((w) => !w.ready || w.handle !== undefined),
    };
  }

  /** Starts every worker and resolves once they are ready (or have failed to start). */
  async start(): Promise<void> {
    if (this.closed) return;
    while (this.workers.length < this.size) this.spawn();
    await Promise.all(
      this.workers.map(
        (worker) =>
          new Promise<void>((done) => {
            if (worker.ready) return done();
            worker.thread.once('message', () => done());
            worker.thread.once('exit', () => done());
          }),
      ),
    );
  }

  /** Runs one read-only statement within `budget`; BudgetExceededError past it or once it is aborted. */
  query<T = Row>(text: string, params: readonly SqlValue[], budget: ReadBudget): Promise<T[]> {
    if (this.closed) return Promise.reject(new Error('the database is closed'));
    let remaining: number;
    try {
      remaining = budgetLeft(budget);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<T[]>((resolvePromise, rejectPromise) => {
      const job: Job = {
        id: this.nextId++,
        text,
        params,
        budget,
        resolve: resolvePromise as (rows: Row[]) => void,
        reject: rejectPromise,
        settled: false,
      };
      // Queued or running, the budget counts: a search waiting for a free worker times out too.
      job.timer = setTimeout(() => this.stop(job, 'deadline'), remaining);
      job.onAbort = () => this.stop(job, 'aborted');
      budget.signal?.addEventListener('abort', job.onAbort, { once: true });
      this.queue.push(job);
      this.dispatch();
    });
  }

  private settle(job: Job, error: unknown, rows?: Row[]): void {
    if (job.settled) return;
    job.settled = true;
    clearTimeout(job.timer);
    if (job.onAbort) job.budget.signal?.removeEventListener('abort', job.onAbort);
    if (error === undefined) job.resolve(rows ?? []);
    else job.reject(error);
  }

  /** Past the budget or aborted: answer now, and stop the statement if a worker runs it. */
  private stop(job: Job, reason: 'deadline' | 'aborted'): void {
    if (job.settled) return;
    this.settle(job, new BudgetExceededError(job.budget.limitMs, reason));
    const queued = this.queue.indexOf(job);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      return;
    }
    const worker = this.workers.find((w) => w.job === job);
    if (!worker) return;
    worker.stopping = true;
    this.interrupt(worker);
  }

  private interrupt(worker: ReadWorker): void {
    const { handle } = worker;
    const statement = this.interruptStatement;
    if (handle === undefined || !statement || worker.retry) return;
    const attempt = () => statement.get(handle);
    attempt();
    worker.retry = setInterval(attempt, INTERRUPT_RETRY_MS);
    worker.retry.unref();
  }

  /** A worker that failed or exited: its job fails, and a new worker starts when one is needed. */
  private remove(worker: ReadWorker): void {
    const index = this.workers.indexOf(worker);
    if (index >= 0) this.workers.splice(index, 1);
    clearInterval(worker.retry);
    if (worker.job && !worker.job.settled) this.settle(worker.job, new Error('the search worker stopped'));
    worker.job = undefined;
    worker.onIdle?.();
  }

  private spawn(): ReadWorker {
    const workerData: ReadWorkerData = { fileName: this.fileName, extension: this.extension };
    const thread = startWorker(new URL('./read-worker.js', import.meta.url), { workerData });
    // Idle workers never keep the process alive.
    thread.unref();
    const worker: ReadWorker = {
      thread,
      statements: statementCache<true>(),
      handle: undefined,
      ready: false,
      job: undefined,
      stopping: false,
    };
    thread.on('message', (message: ReadWorkerMessage) => {
      if ('ready' in message) {
        worker.ready = true;
        worker.handle = message.handle ?? undefined;
      } else {
        const job = worker.job;
        worker.job = undefined;
        worker.stopping = false;
        clearInterval(worker.retry);
        worker.retry = undefined;
        thread.unref();
        worker.onIdle?.();
        if (job && job.id === message.id) {
          if ('error' in message) this.settle(job, sqliteError(message.error));
          else this.settle(job, undefined, message.rows);
        }
      }
      this.dispatch();
    });
    thread.on('error', (thrown: unknown) => {
      // What the thread threw arrives cloned, not always as an Error (a SqliteError becomes { code }).
      const error =
        thrown instanceof Error
          ? thrown
          : sqliteError({
              code: (thrown as { code?: string } | undefined)?.code,
              message: `the search worker failed: ${(thrown as { message?: string } | undefined)?.message ?? (thrown as { code?: string } | undefined)?.code ?? String(thrown)}`,
            });
      if (worker.job) this.settle(worker.job, error);
      // One that could not even start (its connection would not open) would fail again: the waiting
      // searches get the error instead of a new worker each.
      if (!worker.ready) for (const job of this.queue.splice(0)) this.settle(job, error);
      this.remove(worker);
      this.dispatch();
    });
    thread.on('exit', () => {
      this.remove(worker);
      this.dispatch();
    });
    this.workers.push(worker);
    return worker;
  }

  private dispatch(): void {
    if (this.closed) return;
    while (this.queue.length > 0) {
      const worker = this.workers.find((w) => w.ready && !w.job && !w.stopping);
      if (!worker) {
        // Started on demand: a server that never searches never pays for the threads.
        const starting = this.workers.some((w) => !w.ready);
        if (!starting && this.workers.length < this.size) this.spawn();
        return;
      }
      const job = this.queue.shift()!;
      worker.job = job;
      // A busy worker keeps the process alive until it answers.
      worker.thread.ref();
      const evict = worker.statements.has(job.text)
        ? []
        : worker.statements.set(job.text, true, preparedStatementBytes(job.text));
      const keep = worker.statements.get(job.text) !== undefined;
      worker.thread.postMessage({ id: job.id, text: job.text, params: job.params, evict, keep } satisfies ReadRequest);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const job of this.queue.splice(0)) this.settle(job, new Error('the database is closed'));
    const workers = [...this.workers];
    await Promise.all(
      workers.map(async (worker) => {
        const exited = new Promise((done) => worker.thread.once('exit', done));
        worker.thread.ref();
        if (worker.job) {
          // Never terminated mid-statement (that aborts the process): stopped, then closed.
          const idle = new Promise<void>((done) => (worker.onIdle = done));
          this.interrupt(worker);
          await idle;
        }
        if (!worker.ready) await Promise.race([new Promise((done) => worker.thread.once('message', done)), exited]);
        worker.thread.postMessage('close');
        await exited;
      }),
    );
    this.interrupter?.close();
  }
}

function sqliteError(error: { code?: string; message: string }): Error {
  return Object.assign(new Error(error.message), { code: error.code });
}
