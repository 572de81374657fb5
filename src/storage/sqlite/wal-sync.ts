// Durable commits without blocking the event loop. With `synchronous = FULL` SQLite fsyncs the WAL
// inside COMMIT, and better-sqlite3 runs COMMIT on the event loop: every commit stalled every request
// for the length of an fsync. Instead the writer commits with `synchronous = NORMAL` (the WAL is
// written, not yet synced) and this fsyncs the WAL file on libuv's thread pool before any transaction
// of the commit is acknowledged. An fsync of the file covers every write made to it before the call,
// whichever handle made it, so what a client hears about is on disk, as with FULL. Checkpoints keep
// their own syncs (NORMAL syncs the WAL before and the database after each checkpoint).
//
// One fsync serves every commit made before it started; a commit made while one is running waits for
// the next, and all such commits share that one.
import { open } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';

export type Fsync = () => Promise<void>;

export class WalSync {
  private running: Promise<void> | undefined;
  private queued: Promise<void> | undefined;
  /**
   * The first fsync error, kept: after a failed fsync Linux marks the unwritten pages clean and the
   * next fsync succeeds, so nothing written since can be trusted to be on disk (and WAL recovery stops
   * at the first bad frame, losing every later commit). Fail-stop, as PostgreSQL does: every later
   * sync fails with it, until the process restarts and SQLite recovers the WAL.
   */
  failure: unknown;

  constructor(private readonly fsync: Fsync) {}

  /** Resolves once everything written to the WAL before this call is on disk. */
  sync(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    if (!this.running) {
      const run = this.fsync()
        .catch((error: unknown) => {
          this.failure ??= error ?? new Error('fsync failed');
          throw this.failure;
        })
        .finally(() => {
          if (this.running === run) this.running = undefined;
        });
      this.running = run;
      return run;
    }
    // The fsync in flight may have started before the caller's write: wait for the next one.
    this.queued ??= this.running
      .catch(() => undefined)
      .then(() => {
        this.queued = undefined;
        return this.sync();
      });
    return this.queued;
  }
}

/**
 * fsync of the file at `path` through one handle kept open; nothing to do while the file does not
 * exist. `path` must be the file SQLite writes: it resolves symbolic links before naming the WAL.
 */
export function fileFsync(path: string): { fsync: Fsync; close: () => Promise<void> } {
  let handle: FileHandle | undefined;
  return {
    async fsync() {
      if (!handle) {
        try {
          handle = await open(path, 'r+');
        } catch (error) {
          // No WAL file yet: nothing has been written that could need syncing.
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
          throw error;
        }
      }
      await handle.sync();
    },
    async close() {
      await handle?.close();
      handle = undefined;
    },
  };
}
