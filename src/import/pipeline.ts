// Loading NDJSON with several transactions in flight, where the database runs concurrent writers in
// parallel (PostgreSQL): while the database writes one chunk, the importer validates and indexes the
// next. What a one-chunk-at-a-time import guarantees still holds:
// - a chunk that writes a resource a chunk in flight also writes starts only once every chunk before it
//   is done, so the later line still wins;
// - a chunk whose transaction failed is retried (line by line, to keep the good lines) only once every
//   chunk started before it is done, so a line referring to a resource of an earlier chunk finds it;
// - drain() waits for every chunk (a file is loaded before the next one starts).

interface Chunk {
  readonly keys: ReadonlySet<string>;
  done: Promise<void>;
}

export class ChunkPipeline {
  private readonly inFlight: Chunk[] = [];
  private failure: { error: unknown } | undefined;

  /** @param width the most chunks in flight at once (1: one after the other). */
  constructor(private readonly width: number) {}

  /**
   * Starts `write` once there is room (and, if it shares a key with a chunk in flight, once every chunk
   * is done); when `write` answers false, `retry` runs after every chunk started before this one.
   * Resolves when the chunk has started, not when it is done.
   */
  async add(keys: ReadonlySet<string>, write: () => Promise<boolean>, retry: () => Promise<void>): Promise<void> {
    this.rethrow();
    if (this.inFlight.some((chunk) => overlaps(chunk.keys, keys))) await this.drain();
    while (this.inFlight.length >= this.width) await Promise.race(this.inFlight.map((chunk) => chunk.done));
    this.rethrow();
    const earlier = Promise.all(this.inFlight.map((chunk) => chunk.done));
    const chunk: Chunk = { keys, done: Promise.resolve() };
    chunk.done = (async () => {
      if (!(await write())) {
        await earlier;
        await retry();
      }
    })()
      // Never a rejection nobody awaits: kept, and thrown by the next add() or drain().
      .catch((error: unknown) => {
        this.failure ??= { error };
      })
      .finally(() => this.inFlight.splice(this.inFlight.indexOf(chunk), 1));
    this.inFlight.push(chunk);
  }

  /** Resolves once every chunk is done; throws what a chunk threw. */
  async drain(): Promise<void> {
    while (this.inFlight.length > 0) await Promise.all(this.inFlight.map((chunk) => chunk.done));
    this.rethrow();
  }

  private rethrow(): void {
    if (this.failure) throw this.failure.error;
  }
}

function overlaps(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  for (const key of b) if (a.has(key)) return true;
  return false;
}
