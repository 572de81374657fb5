// `serve --workers N`: N server processes on one port through Node's cluster module. This primary process
// serves nothing itself: it starts the workers, starts a replacement for one that dies, keeps the
// workers' shared rate-limit counters when there is no Redis, and shuts them all down together.
// Everything else the workers share lives in PostgreSQL (tokens' state, keys, cursors are stateless,
// scribe and export jobs), which is why N > 1 needs it.
import cluster from 'node:cluster';
import type { Worker } from 'node:cluster';
import { RateLimiterClusterMaster } from 'rate-limiter-flexible';
import type { Logger } from '../logger.js';

/** A worker that dies within this time of its start is failing to start, not crashing under load. */
const STARTUP_GRACE_MS = 30_000;
/** How long the primary waits before replacing a worker that died, so a crash loop does not spin. */
const RESTART_DELAY_MS = 1000;
/** The IPC message that asks a worker to shut down gracefully (serve.ts's worker side listens for it). */
export const SHUTDOWN_MESSAGE = 'ambient-fhir:shutdown';

export interface SupervisorOptions {
  readonly workers: number;
  readonly logger: Logger;
  /** Counters for rate limits and lockouts in this process when the workers have no Redis to share. */
  readonly shareRateLimits: boolean;
}

/**
 * Runs the primary until a signal stops it. Resolves with the exit code: 0 after a graceful shutdown,
 * 1 when the workers cannot start (the first one to fail has printed why) or did not stop cleanly.
 */
export function superviseWorkers(options: SupervisorOptions): Promise<number> {
  const { logger } = options;
  // The master must exist before the first worker creates a limiter (rate-limiter-flexible's protocol).
  if (options.shareRateLimits) new RateLimiterClusterMaster();
  return new Promise((resolve) => {
    let shuttingDown = false;
    let everListened = false;
    let failed = false;
    const startedAt = new Map<number, number>();

    const fork = (): Worker => {
      const worker = cluster.fork();
      startedAt.set(worker.id, Date.now());
      return worker;
    };

    const finishIfDone = () => {
      if (Object.keys(cluster.workers ?? {}).length > 0) return;
      resolve(failed ? 1 : 0);
    };

    const shutDown = (reason: string) => {
      if (shuttingDown) return;
      shuttingDown = true;
      logger.info({ reason }, 'stopping the server processes');
      for (const worker of Object.values(cluster.workers ?? {})) {
        if (worker?.isConnected()) worker.send(SHUTDOWN_MESSAGE);
      }
      finishIfDone();
    };

    cluster.on('listening', (worker) => {
      everListened = true;
      logger.info({ worker: worker.id, worker_pid: worker.process.pid }, 'server process listening');
    });

    cluster.on('exit', (worker, code, signal) => {
      const lived = Date.now() - (startedAt.get(worker.id) ?? 0);
      startedAt.delete(worker.id);
      if (shuttingDown) {
        if (code !== 0) failed = true;
        finishIfDone();
        return;
      }
      if (!everListened && lived < STARTUP_GRACE_MS) {
        // It could not start (bad database, port in use): its own one-line reason is on stderr already,
        // and every other worker would fail the same way.
        failed = true;
        shutDown('a server process failed to start');
        return;
      }
      logger.error({ worker: worker.id, code, signal }, 'a server process died; starting another');
      setTimeout(() => {
        if (!shuttingDown) fork();
      }, RESTART_DELAY_MS).unref();
    });

    let signals = 0;
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.on(signal, () => {
        // A second signal means "now": the workers are killed, not waited for.
        if (++signals > 1) {
          for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGKILL');
          resolve(1);
          return;
        }
        shutDown(signal);
      });
    }

    for (let i = 0; i < options.workers; i++) fork();
  });
}
