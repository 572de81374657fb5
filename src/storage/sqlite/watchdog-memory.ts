// The memory the writer's watchdog (statement-watchdog.ts) shares with its thread (watchdog-worker.ts).

/** Int32 slots. */
export const GENERATION = 0;
/** 1 while the thread sleeps with no deadline (an arm must wake it). */
export const SLEEPING = 1;
/** The generation the thread last interrupted. */
export const FIRED = 2;
/** Float64 slot (after the Int32 ones): the armed statement's deadline, in the main thread's performance.now(). */
export const DEADLINE = 2;

/** GENERATION while the thread interrupts; generations stay below it (masked), odd while armed. */
export const FIRING = -1;
export const CLOSED = -2;

/** The Int32 and Float64 views of one shared buffer (a new one when none is given). */
export function watchdogMemory(shared = new SharedArrayBuffer(16 + 3 * 8)): {
  ints: Int32Array;
  times: Float64Array;
} {
  return { ints: new Int32Array(shared, 0, 4), times: new Float64Array(shared, 16, 3) };
}
