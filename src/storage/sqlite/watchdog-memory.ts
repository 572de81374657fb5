// The memory a statement watchdog thread (watchdog-worker.ts) shares with the connections it watches
// (statement-watchdog.ts): for the thread a doorbell, a stop flag and when it next wakes; per connection
// (slot) a generation, the generation last interrupted and the armed statement's deadline.

/** Int32: bumped to wake the thread. */
export const DOORBELL = 0;
/** Int32: 1 once the thread must end. */
export const STOP = 1;
/** Int32 slots of connection `slot`: its generation (odd while armed), and the one last interrupted. */
export const generationOf = (slot: number) => 2 + 2 * slot;
export const firedOf = (slot: number) => 3 + 2 * slot;
/** Float64: when the thread wakes next on its own (Infinity: only when rung), in the main thread's performance.now(). */
export const WAKE_AT = 0;
/** Float64 slot of connection `slot`: its armed statement's deadline, same clock. */
export const deadlineOf = (slot: number) => 1 + slot;

/** A generation while the thread interrupts; generations stay below it (masked), odd while armed. */
export const FIRING = -1;
/** Connections one thread watches at most (a database has two: the writer and the reader). */
export const MAX_SLOTS = 4;

const INTS = 2 + 2 * MAX_SLOTS;
const FLOATS = 1 + MAX_SLOTS;

/** The Int32 and Float64 views of one shared buffer (a new one when none is given). */
export function watchdogMemory(shared = new SharedArrayBuffer(4 * INTS + 8 * FLOATS)): {
  ints: Int32Array;
  times: Float64Array;
} {
  return { ints: new Int32Array(shared, 0, INTS), times: new Float64Array(shared, 4 * INTS, FLOATS) };
}
