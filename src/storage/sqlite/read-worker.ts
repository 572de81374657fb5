// A worker thread of the SqliteReadPool (read-pool.ts): one read-only connection that runs the searches
// it is sent, one at a time, and keeps prepared the statements the pool tells it to keep.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { Statement } from 'better-sqlite3';
import type { Row, SqlValue } from '../sql/database.js';

export interface ReadWorkerData {
  readonly fileName: string;
  /** The interrupt extension, which tells the pool this connection's sqlite3 handle. */
  readonly extension: string | undefined;
}

/** A search; `evict`: the statements no longer to keep prepared; `keep`: whether to keep this one's. */
export interface ReadRequest {
  readonly id: number;
  readonly text: string;
  readonly params: readonly SqlValue[];
  readonly evict: readonly string[];
  readonly keep: boolean;
}

export type ReadWorkerMessage =
  /** Sent once the connection is open: its sqlite3 handle, null without the extension. */
  | { readonly ready: true; readonly handle: bigint | null }
  | { readonly id: number; readonly rows: Row[] }
  | { readonly id: number; readonly error: { readonly code?: string; readonly message: string } };

const data = workerData as ReadWorkerData;
const port = parentPort!;
const db = new Database(data.fileName, { readonly: true, fileMustExist: true });
db.pragma('busy_timeout = 5000');

/** The connection's sqlite3 pointer, for the pool's sqlite3_interrupt(); null without the extension. */
function connectionHandle(extension: string | undefined): bigint | null {
  if (!extension) return null;
  try {
    // The typings lack the entry point argument better-sqlite3 takes.
    (db as unknown as { loadExtension(file: string, entryPoint: string): void }).loadExtension(
      extension,
      'sqlite3_ambienthandle_init',
    );
    return (db.prepare('SELECT ambient_connection_handle() AS h').safeIntegers(true).get() as { h: bigint }).h;
  } catch {
    return null;
  }
}

const statements = new Map<string, Statement>();
const send = (message: ReadWorkerMessage) => port.postMessage(message);

send({ ready: true, handle: connectionHandle(data.extension) });
port.on('message', (job: ReadRequest | 'close') => {
  if (job === 'close') {
    db.close();
    port.close();
    return;
  }
  try {
    // The main thread decides what stays prepared (SqliteReadPool.dispatch: a byte-bounded LRU).
    for (const text of job.evict) statements.delete(text);
    let statement = statements.get(job.text);
    if (!statement) {
      statement = db.prepare(job.text);
      if (job.keep) statements.set(job.text, statement);
    }
    // A Buffer arrives as a plain Uint8Array; SQLite binds only a Buffer as a blob.
    const params = job.params.map((p) => (p instanceof Uint8Array ? Buffer.from(p) : p));
    send({ id: job.id, rows: statement.all(...params) as Row[] });
  } catch (error) {
    const { code, message } = (error ?? {}) as { code?: string; message?: string };
    send({ id: job.id, error: { code, message: String(message || error) } });
  }
});
