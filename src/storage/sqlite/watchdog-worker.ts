// The thread of a statement watchdog (statement-watchdog.ts): it sleeps towards the earliest deadline
// armed on the shared memory and, once one has passed with the same statement still armed, interrupts
// that connection. One thread watches every connection of a database (the writer and the reader).
import { performance } from 'node:perf_hooks';
import { workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import {
  deadlineOf,
  DOORBELL,
  FIRING,
  firedOf,
  generationOf,
  STOP,
  WAKE_AT,
  watchdogMemory,
} from './watchdog-memory.js';

export interface WatchdogWorkerData {
  readonly extension: string;
  /** The watched connections' sqlite3 handles, by slot. */
  readonly handles: readonly bigint[];
  /** By slot: after an arm, look every this many ms for LINGER_MS (statement-watchdog.ts). */
  readonly tickMs: readonly (number | undefined)[];
  readonly shared: SharedArrayBuffer;
  /** The main thread's performance.timeOrigin. */
  readonly origin: number;
}

/** How long after a ticking slot's last arm the thread keeps ticking before it sleeps until rung. */
const LINGER_MS = 1000;
/**
 * sqlite3_interrupt() stops only a statement that is running: one armed whose deadline passed before it
 * started (the main thread held up between the arm and the statement) is interrupted again this often,
 * for as long as it stays armed.
 */
const REFIRE_MS = 2;

const data = workerData as WatchdogWorkerData;
const db = new Database(':memory:');
// The typings lack the entry point argument better-sqlite3 takes.
(db as unknown as { loadExtension(file: string, entryPoint: string): void }).loadExtension(
  data.extension,
  'sqlite3_ambientinterrupt_init',
);
const interrupt = db.prepare('SELECT ambient_interrupt(?)');
const { ints, times } = watchdogMemory(data.shared);
// The main thread's performance.now(), read on this thread.
const now = () => performance.timeOrigin + performance.now() - data.origin;
const slots = data.handles.map((handle, slot) => ({
  handle,
  slot,
  tickMs: data.tickMs[slot],
  seen: 0,
  movedAt: 0,
  firedAt: 0,
}));

while (Atomics.load(ints, STOP) === 0) {
  const bell = Atomics.load(ints, DOORBELL);
  let wait = Infinity;
  for (const s of slots) {
    const generation = Atomics.load(ints, generationOf(s.slot));
    if (generation !== s.seen) {
      s.seen = generation;
      s.movedAt = now();
    }
    if (s.tickMs !== undefined && now() - s.movedAt < LINGER_MS) wait = Math.min(wait, s.tickMs);
    // Armed generations are odd.
    if ((generation & 1) === 0) continue;
    const live = generation;
    // Interrupted already and still armed: again every REFIRE_MS, in case nothing was running then.
    const refired = Atomics.load(ints, firedOf(s.slot)) === live;
    const left = refired ? s.firedAt + REFIRE_MS - now() : times[deadlineOf(s.slot)] - now();
    if (left > 0) {
      wait = Math.min(wait, left);
      continue;
    }
    if (Atomics.compareExchange(ints, generationOf(s.slot), live, FIRING) !== live) continue;
    interrupt.get(s.handle);
    s.firedAt = now();
    Atomics.store(ints, firedOf(s.slot), live);
    Atomics.store(ints, generationOf(s.slot), live);
    Atomics.notify(ints, generationOf(s.slot));
    wait = Math.min(wait, REFIRE_MS);
  }
  // Said before it sleeps, then the generations checked once more: an arm the check misses comes after
  // it, and so reads this WAKE_AT and rings the doorbell if its deadline is earlier.
  times[WAKE_AT] = now() + wait;
  // A full fence (an atomic read-modify-write that changes nothing) between that store and the loads.
  Atomics.add(ints, STOP, 0);
  if (slots.some((s) => Atomics.load(ints, generationOf(s.slot)) !== s.seen)) continue;
  Atomics.wait(ints, DOORBELL, bell, wait);
}
db.close();
