// Streaming replicas for searches (DATABASE_READ_URLS). Every POLL_MS the primary's WAL position and
// each replica's replayed position are read; a replica's lag is how long ago the primary stood where
// the replica stands now (0 when it has replayed everything). A search goes to a replica that answered
// the last poll, lags at most the allowed time and has replayed the caller's last write (read-your-
// writes, write-positions.ts); otherwise to the primary.
import { walPosition } from '../write-positions.js';

/** How often positions are read. */
const POLL_MS = 200;
/** How long primary positions are remembered to measure lag (beyond it, a replica counts as too far behind). */
const HISTORY_MS = 60_000;
/**
 * How long one position read may take. A server that stops answering without closing the connection (a
 * host gone from the network) would otherwise hold the round forever, and with it every later one, so
 * that a replica last seen healthy would go on being chosen.
 */
const POLL_TIMEOUT_MS = 2000;

class PollTimeout extends Error {}

/** `promise`, or a PollTimeout after `ms` (the read itself is left to finish or fail on its own). */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PollTimeout()), ms);
  });
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export interface ReplicaProbe {
  /** The primary's WAL position now. */
  primaryPosition(): Promise<string>;
  /** The replica's replayed position (pg_last_wal_replay_lsn), or an error when it does not answer. */
  replayedPosition(url: string): Promise<string>;
}

/**
 * Where a read goes: a replica, or the primary because every replica that answers within the allowed lag
 * has yet to replay the caller's last write (`own-write`), or because none answers within it (`none`).
 */
export type ReplicaChoice = { readonly url: string } | { readonly primary: 'own-write' | 'none' };

interface ReplicaState {
  readonly url: string;
  replayed: bigint | undefined;
  lagMs: number;
  healthy: boolean;
}

export class ReplicaSet {
  private readonly states: ReplicaState[];
  private readonly samples: { at: number; position: bigint }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private next = 0;
  private polling: Promise<void> | undefined;

  constructor(
    urls: readonly string[],
    private readonly probe: ReplicaProbe,
    private readonly maxLagMs: number,
    private readonly now: () => number = Date.now,
    private readonly pollTimeoutMs = POLL_TIMEOUT_MS,
  ) {
    this.states = urls.map((url) => ({ url, replayed: undefined, lagMs: Infinity, healthy: false }));
  }

  start(): void {
    if (this.timer) return;
    void this.poll();
    this.timer = setInterval(() => void this.poll(), POLL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round of position reads (at most one at a time). */
  poll(): Promise<void> {
    this.polling ??= this.readPositions().finally(() => {
      this.polling = undefined;
    });
    return this.polling;
  }

  private async readPositions(): Promise<void> {
    const at = this.now();
    try {
      const position = walPosition(await within(this.probe.primaryPosition(), this.pollTimeoutMs));
      if (position !== undefined) this.samples.push({ at, position });
    } catch {
      // The primary did not answer: lags are measured against the positions already seen.
    }
    while (this.samples.length > 0 && this.samples[0].at < at - HISTORY_MS) this.samples.shift();
    await Promise.all(
      this.states.map(async (state) => {
        try {
          const replayed = walPosition(await within(this.probe.replayedPosition(state.url), this.pollTimeoutMs));
          state.replayed = replayed;
          state.healthy = replayed !== undefined;
          state.lagMs = replayed === undefined ? Infinity : this.lagOf(replayed, at);
        } catch {
          state.healthy = false;
        }
      }),
    );
  }

  /** How long ago the primary was where `replayed` is: the newest sample at or below it. */
  private lagOf(replayed: bigint, at: number): number {
    const newest = this.samples[this.samples.length - 1];
    if (!newest || replayed >= newest.position) return 0;
    for (let i = this.samples.length - 1; i >= 0; i--) {
      // The primary was past `replayed` since the sample after this one at the latest.
      if (this.samples[i].position <= replayed) return at - this.samples[i + 1].at;
    }
    return Infinity;
  }

  /**
   * A replica for a search that must see everything up to `after` (the caller's last write), in turn
   * among those that qualify; else why the primary answers.
   */
  choose(after: string | undefined): ReplicaChoice {
    const floor = after === undefined ? undefined : walPosition(after);
    const live = this.states.filter((s) => s.healthy && s.lagMs <= this.maxLagMs && s.replayed !== undefined);
    if (live.length === 0) return { primary: 'none' };
    if (after !== undefined && floor === undefined) return { primary: 'own-write' };
    const candidates = floor === undefined ? live : live.filter((s) => s.replayed! >= floor);
    if (candidates.length === 0) return { primary: 'own-write' };
    return { url: candidates[this.next++ % candidates.length].url };
  }

  /** A replica whose connection failed is left out until it answers a poll again. */
  failed(url: string): void {
    const state = this.states.find((s) => s.url === url);
    if (state) state.healthy = false;
  }

  /** Each replica's state (what `choose` decides from), in DATABASE_READ_URLS order. */
  status(): { url: string; healthy: boolean; lagMs: number }[] {
    return this.states.map(({ url, healthy, lagMs }) => ({ url, healthy, lagMs }));
  }
}
