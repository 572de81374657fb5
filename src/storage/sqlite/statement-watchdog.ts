// A watchdog that stops a statement of an SQLite connection on the main thread at a deadline: the writer
// (the safety net of write transactions) and the reader that runs short searches inline (sqlite-database.ts).
// better-sqlite3 runs a statement in one synchronous native call, so nothing on the main thread can stop
// it once it started: a thread of its own, holding the connections' sqlite3 handles, calls
// sqlite3_interrupt() on one (native/sqlite-interrupt.c) when the deadline armed for it passes. One
// thread watches every connection of a database: each thread is an isolate of its own (about 9 MB).
//
// Arming must cost nothing measurable, since it happens per statement: the deadline and a generation live
// in shared memory, so arming and disarming are a few atomic operations, with no message. The thread
// says in shared memory when it wakes next; an arm rings it (a futex wake) only when its deadline is
// earlier than that, and otherwise the thread finds it when it wakes. A connection watched with `tickMs`
// (the inline reader, armed for every search) keeps the thread waking every `tickMs` for a second after
// each arm, so that a burst of short statements does not ring it once per statement; its statements
// then run at most `tickMs` past their deadline.
//
// An interrupt must never reach a statement it was not armed for: the thread claims the generation it
// saw (compare-and-exchange to FIRING) before it interrupts, and the main thread disarms with a
// compare-and-exchange too, waiting out a claim in progress (microseconds). An interrupt that lands
// after its statement finished finds no statement running, and SQLite clears it when the next starts.
import { performance } from 'node:perf_hooks';
import type { Worker } from 'node:worker_threads';
import type { Database as SqliteConnection } from 'better-sqlite3';
import { startWorker } from '../../workers/start-worker.js';
import { StatementInterruptedError } from '../sql/database.js';
import {
  deadlineOf,
  DOORBELL,
  FIRING,
  firedOf,
  generationOf,
  MAX_SLOTS,
  STOP,
  WAKE_AT,
  watchdogMemory,
} from './watchdog-memory.js';
import type { WatchdogWorkerData } from './watchdog-worker.js';

/** Generations are masked below it, so that they are never FIRING. */
const GENERATION_MASK = 0x3fffffff;

/** The thread that watches the connections of one database; started at the first arm. */
export class WatchdogThread {
  private readonly ints: Int32Array;
  private readonly times: Float64Array;
  private readonly handles: bigint[] = [];
  private readonly tickMs: (number | undefined)[] = [];
  private thread: Worker | undefined;
  private exited = false;

  /** `extension`: the interrupt extension (native/sqlite-interrupt.c); without one nothing is watched. */
  constructor(private readonly extension: string) {
    ({ ints: this.ints, times: this.times } = watchdogMemory());
    this.times[WAKE_AT] = Infinity;
  }

  /**
   * A watchdog for `connection` (on the main thread), or undefined where the extension does not load
   * into it: then its statements are not bounded. Every connection is watched before the first arm.
   */
  watch(connection: SqliteConnection, options: { tickMs?: number } = {}): StatementWatchdog | undefined {
    if (this.thread) throw new Error('a watchdog thread takes its connections before it starts');
    if (this.handles.length >= MAX_SLOTS) throw new Error(`a watchdog thread watches ${MAX_SLOTS} connections`);
    let handle: bigint;
    try {
      // The typings lack the entry point argument better-sqlite3 takes.
      (connection as unknown as { loadExtension(file: string, entryPoint: string): void }).loadExtension(
        this.extension,
        'sqlite3_ambienthandle_init',
      );
      handle = (
        connection.prepare('SELECT ambient_connection_handle() AS handle').safeIntegers(true).get() as {
          handle: bigint;
        }
      ).handle;
    } catch (error) {
      process.emitWarning(
        `SQLite interrupt extension not loaded on a connection (${(error as Error).message}); its statements are not bounded`,
      );
      return undefined;
    }
    const slot = this.handles.length;
    this.handles.push(handle);
    this.tickMs.push(options.tickMs);
    this.ints[firedOf(slot)] = FIRING;
    return new StatementWatchdog(this, slot, this.ints, this.times);
  }

  /** Starts the thread if it has not started (the first arm): a process that never arms never pays for it. */
  ensureStarted(): void {
    if (this.thread) return;
    const workerData: WatchdogWorkerData = {
      extension: this.extension,
      handles: this.handles,
      tickMs: this.tickMs,
      shared: this.ints.buffer as SharedArrayBuffer,
      origin: performance.timeOrigin,
    };
    const thread = startWorker(new URL('./watchdog-worker.js', import.meta.url), { workerData });
    // Never what keeps the process alive; it waits on shared memory, not on messages.
    thread.unref();
    thread.once('exit', () => (this.exited = true));
    thread.on('error', (error) =>
      process.emitWarning(`the SQLite statement watchdog stopped (${error.message}); statements are not bounded`),
    );
    this.thread = thread;
  }

  async close(): Promise<void> {
    const thread = this.thread;
    if (!thread || this.exited) return;
    const exited = new Promise((resolve) => thread.once('exit', resolve));
    // Unreferenced, it would not keep a process awaiting close() alive until it has exited (checkpointer.ts).
    thread.ref();
    Atomics.store(this.ints, STOP, 1);
    Atomics.add(this.ints, DOORBELL, 1);
    Atomics.notify(this.ints, DOORBELL);
    await exited;
  }
}

/** Stops the statements of one connection at their deadlines, through its database's WatchdogThread. */
export class StatementWatchdog {
  private generation = 0;

  constructor(
    private readonly owner: WatchdogThread,
    private readonly slot: number,
    private readonly ints: Int32Array,
    private readonly times: Float64Array,
  ) {}

  /**
   * Runs `statement` (synchronous, on the watched connection) stopped at `deadline` (performance.now()
   * ms). A statement interrupted at it throws StatementInterruptedError.
   */
  run<T>(deadline: number, statement: () => T): T {
    this.owner.ensureStarted();
    const generation = ((this.generation + 1) & GENERATION_MASK) | 1;
    this.generation = generation;
    this.times[deadlineOf(this.slot)] = deadline;
    Atomics.store(this.ints, generationOf(this.slot), generation);
    // The thread wakes later than this deadline: ring it, so that it sleeps towards this one instead.
    if (deadline < this.times[WAKE_AT]) {
      Atomics.add(this.ints, DOORBELL, 1);
      Atomics.notify(this.ints, DOORBELL, 1);
    }
    let result: T;
    try {
      result = statement();
    } catch (error) {
      if (this.disarm(generation) && (error as { code?: string }).code === 'SQLITE_INTERRUPT') {
        throw new StatementInterruptedError();
      }
      throw error;
    }
    // Fired just as it finished: the interrupt found no statement running, the result stands.
    this.disarm(generation);
    return result;
  }

  /** Ends the arm of `generation`; true if the thread interrupted for it. */
  private disarm(generation: number): boolean {
    const index = generationOf(this.slot);
    const next = (generation + 1) & GENERATION_MASK;
    for (;;) {
      const seen = Atomics.compareExchange(this.ints, index, generation, next);
      if (seen === generation) return Atomics.load(this.ints, firedOf(this.slot)) === generation;
      // FIRING: the thread is inside sqlite3_interrupt() for this generation; it restores it after.
      Atomics.wait(this.ints, index, FIRING, 1);
    }
  }
}
