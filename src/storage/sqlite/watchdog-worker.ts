// The thread of a statement watchdog (statement-watchdog.ts): it sleeps towards the armed deadline on the
// shared memory and, once it has passed with the same statement still armed, interrupts the connection.
import { performance } from 'node:perf_hooks';
import { workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { CLOSED, DEADLINE, FIRED, FIRING, GENERATION, SLEEPING, watchdogMemory } from './watchdog-memory.js';

export interface WatchdogWorkerData {
  readonly extension: string;
  /** The writer's sqlite3 handle. */
  readonly handle: bigint;
  readonly shared: SharedArrayBuffer;
  /** The main thread's performance.timeOrigin. */
  readonly origin: number;
  /** Look every this many ms for LINGER_MS after an arm instead of sleeping with no deadline. */
  readonly tickMs: number | undefined;
}

/** How long after the last arm the thread keeps ticking (`tickMs`) before it sleeps with no deadline. */
const LINGER_MS = 1000;

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
let lastArmed = -Infinity;
let lastGeneration = 0;
for (;;) {
  const generation = Atomics.load(ints, GENERATION);
  if (generation === CLOSED) break;
  if (generation !== lastGeneration) {
    lastGeneration = generation;
    lastArmed = now();
  }
  if ((generation & 1) === 0 || Atomics.load(ints, FIRED) === generation) {
    if (data.tickMs !== undefined && now() - lastArmed < LINGER_MS) {
      // SLEEPING stays 0: an arm meanwhile is seen at the next tick, without a wake-up of its own.
      Atomics.wait(ints, GENERATION, generation, data.tickMs);
      continue;
    }
    Atomics.store(ints, SLEEPING, 1);
    Atomics.wait(ints, GENERATION, generation);
    Atomics.store(ints, SLEEPING, 0);
    continue;
  }
  const left = times[DEADLINE] - now();
  if (left > 0) {
    Atomics.wait(ints, GENERATION, generation, left);
    continue;
  }
  if (Atomics.compareExchange(ints, GENERATION, generation, FIRING) !== generation) continue;
  interrupt.get(data.handle);
  Atomics.store(ints, FIRED, generation);
  Atomics.store(ints, GENERATION, generation);
  Atomics.notify(ints, GENERATION);
}
db.close();
