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

  constructor(private readonly fsync: Fsync) {}

  /** Resolves once everything written to the WAL before this call is on disk. */
  sync(): Promise<void> {
    if (!this.running) {
      const run = this.fsync().finally(() => {
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

/** fsync of the file at `path` through one handle kept open; nothing to do while the file does not exist. */
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
