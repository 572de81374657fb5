// A bounded pool of job workers in this process: at most `size` jobs run at once. It looks for work when
// woken (a submission in this process, a job finishing) and every `pollMs` (submissions to other processes,
// retries falling due, leases of dead processes expiring). While a job runs, a heartbeat keeps its lease;
// stop() aborts the running jobs and gives them back to the queue, so a restart resumes them at once.
import type { Logger } from '../logger.js';
import type { SqlExecutor } from '../storage/sql/database.js';
import { isPermanent } from './processor.js';
import type { Job, JobQueue } from './queue.js';
import { cleanReason } from '../storage/stored-text.js';
import { LeaseLostError } from './queue.js';

export interface PoolOptions {
  readonly size: number;
  readonly pollMs: number;
  readonly leaseMs: number;
  readonly logger?: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** Told how each attempt ended (metrics); not for attempts given back at shutdown. */
  readonly onOutcome?: (outcome: 'completed' | 'failed' | 'retried' | 'lost') => void;
}

export type JobHandler = (job: Job, signal: AbortSignal) => Promise<void>;

/** Ends a job's record FAILED (inside the job's failing transaction). */
export type FailRecord = (tx: SqlExecutor, job: Job, reason: string) => Promise<void>;

class ShutdownError extends Error {
  constructor() {
    super('the server is shutting down');
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class WorkerPool {
  private readonly running = new Map<number, { controller: AbortController; done: Promise<void> }>();
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private stopping = false;
  private filling = false;
  private fillAgain = false;

  constructor(
    private readonly queue: JobQueue,
    private readonly handler: JobHandler,
    private readonly failRecord: FailRecord,
    private readonly options: PoolOptions,
  ) {}

  /** Jobs running now. */
  get active(): number {
    return this.running.size;
  }

  start(): void {
    if (this.started || this.options.size === 0) return;
    this.started = true;
    this.timer = setInterval(() => this.wake(), this.options.pollMs);
    this.timer.unref();
    this.wake();
  }

  /** Looks for work now (e.g. right after a submission). */
  wake(): void {
    if (!this.started || this.stopping) return;
    if (this.filling) {
      this.fillAgain = true;
      return;
    }
    void this.fill();
  }

  private async fill(): Promise<void> {
    this.filling = true;
    try {
      do {
        this.fillAgain = false;
        while (!this.stopping && this.running.size < this.options.size) {
          const job = await this.queue.claim();
          if (!job) break;
          if (this.stopping) {
            await this.queue.release(job);
            break;
          }
          this.run(job);
        }
      } while (this.fillAgain && !this.stopping);
    } catch (error) {
      this.options.logger?.error({ err: error }, 'scribe: could not claim jobs');
    } finally {
      this.filling = false;
    }
  }

  private run(job: Job): void {
    const controller = new AbortController();
    const heartbeat = setInterval(
      () => {
        this.queue.heartbeat(job).then(
          (held) => {
            if (!held) controller.abort(new LeaseLostError(job.id));
          },
          () => undefined, // a missed heartbeat is retried at the next tick; the lease outlives two
        );
      },
      Math.max(10, Math.floor(this.options.leaseMs / 3)),
    );
    heartbeat.unref();
    const done = this.execute(job, controller.signal).finally(() => {
      clearInterval(heartbeat);
      this.running.delete(job.id);
      this.wake();
    });
    this.running.set(job.id, { controller, done });
  }

  private async execute(job: Job, signal: AbortSignal): Promise<void> {
    const log = this.options.logger;
    try {
      await this.handler(job, signal);
      this.options.onOutcome?.('completed');
      log?.info({ scribe_id: job.recordId, job_id: job.id, attempt: job.attempts }, 'scribe: record completed');
    } catch (error) {
      if (signal.reason instanceof ShutdownError) {
        await this.queue.release(job).catch(() => undefined);
        return;
      }
      if (error instanceof LeaseLostError || signal.reason instanceof LeaseLostError) {
        this.options.onOutcome?.('lost');
        log?.warn({ scribe_id: job.recordId, job_id: job.id }, 'scribe: lease lost, another worker has the job');
        return;
      }
      const permanent = isPermanent(error);
      const reason = errorMessage(error);
      try {
        const outcome = await this.queue.fail(job, reason, permanent, (tx) =>
          this.failRecord(
            tx,
            job,
            cleanReason(
              permanent ? reason : `${reason} (gave up after ${job.attempts} attempt${job.attempts === 1 ? '' : 's'})`,
            ),
          ),
        );
        this.options.onOutcome?.(outcome === 'retry' ? 'retried' : outcome);
        log?.warn(
          { scribe_id: job.recordId, job_id: job.id, attempt: job.attempts, outcome, permanent, reason },
          outcome === 'retry' ? 'scribe: attempt failed, will retry' : 'scribe: job failed',
        );
      } catch (failError) {
        // The database is unreachable: the lease expires and the job is taken over later.
        log?.error({ err: failError, scribe_id: job.recordId, job_id: job.id }, 'scribe: could not record a failure');
      }
    }
  }

  /** Stops claiming, aborts the running jobs and gives them back to the queue. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
    // A claim may be on its way: once the filling loop has seen `stopping`, no job starts any more.
    while (this.filling) await new Promise((resolve) => setTimeout(resolve, 5));
    for (const { controller } of this.running.values()) controller.abort(new ShutdownError());
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
  }
}
