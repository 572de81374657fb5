// The worker thread of the Checkpointer (checkpointer.ts): a connection of its own that runs a PASSIVE
// WAL checkpoint each time it is asked, and answers how far it got.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { CheckpointResult } from './checkpointer.js';

export interface CheckpointWorkerData {
  readonly fileName: string;
}

const port = parentPort!;
const db = new Database((workerData as CheckpointWorkerData).fileName);
// FULL for this connection: a checkpoint syncs the WAL before copying and the database file after.
db.pragma('synchronous = FULL');
db.pragma('busy_timeout = 5000');
const send = (result: CheckpointResult & { readonly busy?: number }) => port.postMessage(result);

port.on('message', (message: 'checkpoint' | 'close') => {
  if (message === 'close') {
    db.close();
    port.close();
    return;
  }
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[];
    send({ ok: true, busy: result.busy, log: result.log, checkpointed: result.checkpointed });
  } catch (error) {
    send({ ok: false, message: String((error as { message?: string } | undefined)?.message || error) });
  }
});
