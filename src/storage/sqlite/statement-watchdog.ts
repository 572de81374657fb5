// A watchdog that stops a statement of an SQLite connection on the main thread at a deadline: the writer
// (the safety net of write transactions) and the reader that runs short searches inline (sqlite-database.ts).
// better-sqlite3 runs a statement in one synchronous native call, so nothing on the main thread can stop
// it once it started: a thread of its own, holding the connection's sqlite3 handle, calls
// sqlite3_interrupt() on it (native/sqlite-interrupt.c) when the armed deadline passes.
//
// Arming must cost nothing measurable, since it happens per statement: the deadline and a generation live
// in shared memory, so arming and disarming are a few atomic operations, with no message and no system
// call. The thread is woken only when it sleeps with no deadline at all, or when a deadline earlier than
// the one it sleeps towards is armed (`urgent`); otherwise it wakes at the deadline it last saw, finds the
// statement it armed for long finished and sleeps towards the current one. With `tickMs` (the inline
// reader, armed for every search) the thread, after an arm, keeps looking every `tickMs` for a while
// instead of sleeping with no deadline, so that a burst of short statements wakes it a few hundred times a
// second rather than once per statement; a statement then runs at most `tickMs` past its deadline.
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
import { CLOSED, DEADLINE, FIRED, FIRING, GENERATION, SLEEPING, watchdogMemory } from './watchdog-memory.js';
import type { WatchdogWorkerData } from './watchdog-worker.js';

/** Generations are masked below it, so that they are never FIRING or CLOSED. */
const GENERATION_MASK = 0x3fffffff;

export class StatementWatchdog {
  private readonly ints: Int32Array;
  private readonly times: Float64Array;
  private generation = 0;
  /** Started at the first arm: a process that never writes never pays for the thread. */
  private thread: Worker | undefined;
  private exited = false;

  private constructor(
    private readonly handle: bigint,
    private readonly extension: string,
    private readonly tickMs: number | undefined,
  ) {
    ({ ints: this.ints, times: this.times } = watchdogMemory());
    this.ints[FIRED] = FIRING;
  }

  private spawn(): void {
    const workerData: WatchdogWorkerData = {
      extension: this.extension,
      handle: this.handle,
      shared: this.ints.buffer as SharedArrayBuffer,
      origin: performance.timeOrigin,
      tickMs: this.tickMs,
    };
    const thread = startWorker(new URL('./watchdog-worker.js', import.meta.url), { workerData });
    // Never what keeps the process alive; it waits on shared memory, not on messages.
    thread.unref();
    thread.once('exit', () => (this.exited = true));
    thread.on('error', (error) =>
      process.emitWarning(`the SQLite writer's watchdog stopped (${error.message}); its statements are not bounded`),
    );
    this.thread = thread;
  }

  /**
   * A watchdog for `connection` (on the main thread), or undefined where the interrupt extension
   * (native/sqlite-interrupt.c) is not built or does not load: then statements are not bounded. `tickMs`:
   * see the header.
   */
  static start(
    connection: SqliteConnection,
    extension: string | undefined,
    options: { tickMs?: number } = {},
  ): StatementWatchdog | undefined {
    if (!extension) return undefined;
    try {
      // The typings lack the entry point argument better-sqlite3 takes.
      (connection as unknown as { loadExtension(file: string, entryPoint: string): void }).loadExtension(
        extension,
        'sqlite3_ambienthandle_init',
      );
      const { handle } = connection
        .prepare('SELECT ambient_connection_handle() AS handle')
        .safeIntegers(true)
        .get() as {
        handle: bigint;
      };
      return new StatementWatchdog(handle, extension, options.tickMs);
    } catch (error) {
      process.emitWarning(
        `SQLite interrupt extension not loaded on the writer (${(error as Error).message}); its statements are not bounded`,
      );
      return undefined;
    }
  }

  /**
   * Runs `statement` (synchronous, on the watched connection) stopped at `deadline` (performance.now()
   * ms). `urgent`: the deadline may be earlier than the ones armed before (the thread is woken for it).
   * A statement interrupted at it throws StatementInterruptedError.
   */
  run<T>(deadline: number, urgent: boolean, statement: () => T): T {
    if (!this.thread) this.spawn();
    const generation = ((this.generation + 1) & GENERATION_MASK) | 1;
    this.generation = generation;
    this.times[DEADLINE] = deadline;
    Atomics.store(this.ints, GENERATION, generation);
    if (urgent || Atomics.load(this.ints, SLEEPING) === 1) Atomics.notify(this.ints, GENERATION, 1);
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
    const next = (generation + 1) & GENERATION_MASK;
    for (;;) {
      const seen = Atomics.compareExchange(this.ints, GENERATION, generation, next);
      if (seen === generation) return Atomics.load(this.ints, FIRED) === generation;
      // FIRING: the thread is inside sqlite3_interrupt() for this generation; it restores it after.
      Atomics.wait(this.ints, GENERATION, FIRING, 1);
    }
  }

  async close(): Promise<void> {
    const thread = this.thread;
    if (!thread || this.exited) return;
    const exited = new Promise((resolve) => thread.once('exit', resolve));
    // Unreferenced, it would not keep a process awaiting close() alive until it has exited (checkpointer.ts).
    thread.ref();
    Atomics.store(this.ints, GENERATION, CLOSED);
    Atomics.notify(this.ints, GENERATION);
    await exited;
  }
}
