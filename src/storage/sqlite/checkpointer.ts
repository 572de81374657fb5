// WAL checkpoints on a worker thread. SQLite's automatic checkpoint runs inside the COMMIT that
// crosses 1,000 WAL pages: it copies the pages into the database file and fsyncs both files, and
// with better-sqlite3 that is on the event loop (measured: 4% of commits took over 2 ms, half of all
// commit time, the creates' p99). A worker thread with its own connection runs PASSIVE checkpoints
// (they never block the writer or readers) after every CHECKPOINT_EVERY commits, or a second after the
// last commit, and copies most frames; the writer keeps an automatic checkpoint at a higher threshold,
// which then only copies what the worker has not and lets SQLite restart the WAL (see
// sqlite-database.ts). If the worker fails, the writer goes back to SQLite's default threshold.
import type { Worker } from 'node:worker_threads';
import { startWorker } from '../../workers/start-worker.js';
import type { CheckpointWorkerData } from './checkpoint-worker.js';

const CHECKPOINT_EVERY = 32;
const IDLE_CHECKPOINT_MS = 1000;

export interface CheckpointResult {
  readonly ok: boolean;
  /** WAL frames, and how many of them are now in the database file. */
  readonly log?: number;
  readonly checkpointed?: number;
  readonly message?: string;
}

/** Consecutive failed checkpoints after which the worker is given up. */
const MAX_FAILURES = 3;

export class Checkpointer {
  private worker: Worker | undefined;
  private commits = 0;
  private running = false;
  private idleTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private exited = false;
  private failures = 0;
  private readonly waiting: ((result: CheckpointResult) => void)[] = [];

  /** `onFailure` runs once if the worker cannot checkpoint (the caller turns automatic checkpoints back on). */
  constructor(
    private readonly fileName: string,
    private readonly onFailure: (reason: string) => void,
  ) {}

  /** After each commit of the writer. Never throws: it runs between a COMMIT and its answer. */
  committed(): void {
    if (this.closed) return;
    this.commits++;
    if (this.commits >= CHECKPOINT_EVERY) this.start();
    else this.armIdleTimer();
  }

  private armIdleTimer(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.start(), IDLE_CHECKPOINT_MS);
    this.idleTimer.unref();
  }

  /** Runs a checkpoint now (tests); resolves with its result. */
  checkpoint(): Promise<CheckpointResult> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      if (!this.running) this.start(true);
    });
  }

  async close(): Promise<void> {
    clearTimeout(this.idleTimer);
    if (this.closed) return;
    this.closed = true;
    const worker = this.worker;
    if (!worker || this.exited) return;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    // Unreferenced, the worker would not keep the process alive until it has closed its connection: a
    // CLI awaiting close() would exit mid-await (exit code 13).
    worker.ref();
    worker.postMessage('close');
    await exited;
  }

  /** Started at the first checkpoint: a server that only reads never pays for the thread. */
  private thread(): Worker {
    if (this.worker) return this.worker;
    const workerData: CheckpointWorkerData = { fileName: this.fileName };
    const worker = startWorker(new URL('./checkpoint-worker.js', import.meta.url), { workerData });
    // Never what keeps the process alive.
    worker.unref();
    worker.on('message', (result: CheckpointResult) => this.finished(result));
    worker.on('error', (error) => this.fail(error.message));
    worker.on('exit', () => {
      this.exited = true;
      this.fail('the checkpoint worker exited');
    });
    this.worker = worker;
    return worker;
  }

  private start(force = false): void {
    clearTimeout(this.idleTimer);
    if (this.closed || this.running || (!force && this.commits === 0)) return;
    this.commits = 0;
    this.running = true;
    try {
      this.thread().postMessage('checkpoint');
    } catch (error) {
      this.fail(error instanceof Error ? error.message : String(error));
    }
  }

  private finished(result: CheckpointResult): void {
    this.running = false;
    for (const resolve of this.waiting.splice(0)) resolve(result);
    if (!result.ok) {
      // Busy (another process checkpointing, a lock held): try again later, give up if it persists.
      if (++this.failures >= MAX_FAILURES) this.fail(result.message ?? 'checkpoint failed');
      return;
    }
    this.failures = 0;
    // Commits made while it ran: at once when there are many, else after a second of quiet.
    if (this.commits >= CHECKPOINT_EVERY) this.start();
    else if (this.commits > 0) this.armIdleTimer();
  }

  private fail(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.running = false;
    for (const resolve of this.waiting.splice(0)) resolve({ ok: false, message: reason });
    try {
      this.onFailure(reason);
    } finally {
      void this.worker?.terminate();
    }
  }
}
