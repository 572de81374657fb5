// Short searches on the event loop, on a leash. Handing a statement to a read worker (read-pool.ts) costs
// more than most search statements take: a message each way, the rows cloned between threads, and a
// thread woken on a machine whose two cores the client shares (docs/benchmarks.md, "A request, step
// by step"). So a search statement first runs on the main thread's read-only connection, armed with a
// statement watchdog at min(its budget, INLINE_LEASH_MS from now): the event loop is held no longer than
// that (plus the watchdog's tick). A statement stopped by the leash, not by its budget, runs again on a
// read worker within what is left of its budget, and its SQL text is remembered as slow for a while
// (SlowStatements), so that the searches of that shape go to the workers directly instead of paying the
// leash each time.
import { performance } from 'node:perf_hooks';
import { ByteLru } from '../sql/byte-lru.js';

/** How long a search statement may hold the event loop before it moves to a read worker. */
export const INLINE_LEASH_MS = 5;
/** The watchdog's tick for the inline reader: a statement runs at most this much past its leash. */
export const INLINE_TICK_MS = 5;
/**
 * A statement text that overran the leash goes to the read workers for a tenth of a second, doubled for
 * each overrun in a row up to a minute. One overrun says little on two shared cores (a statement of
 * 0.3 ms can be descheduled past the leash, and then costs one hand-off more); a text that keeps
 * overrunning is slow, and after ten overruns goes to the workers for a minute at a time.
 */
const FIRST_SLOW_MS = 100;
const MAX_SLOW_MS = 60_000;

/** SQL texts of search statements that overran the leash lately, bounded like the prepared statements. */
export class SlowStatements {
  private readonly marks = new ByteLru<{ until: number; overruns: number }>({
    maxBytes: 4 * 1024 * 1024,
    maxEntries: 2000,
  });

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Should `sql` skip the inline attempt (it overran the leash lately)? */
  isSlow(sql: string): boolean {
    const mark = this.marks.get(sql);
    return mark !== undefined && mark.until > this.now();
  }

  /** `sql` overran the leash. */
  overran(sql: string): void {
    const overruns = (this.marks.get(sql)?.overruns ?? 0) + 1;
    const slowMs = Math.min(MAX_SLOW_MS, FIRST_SLOW_MS * 2 ** (overruns - 1));
    // A text too large to remember (a quarter of the bound) is simply tried inline again: at most a
    // leash per such search.
    this.marks.set(sql, { until: this.now() + slowMs, overruns }, 2 * sql.length + 64);
  }

  /** `sql` ran within the leash: its overruns are forgotten. */
  ranInline(sql: string): void {
    if (this.marks.size > 0) this.marks.delete(sql);
  }
}
