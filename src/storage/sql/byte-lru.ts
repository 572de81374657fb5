// A least-recently-used cache bounded by the bytes its entries hold, not only by their number: the
// prepared statements of SQLite (sqlite-database.ts, read-pool.ts) are keyed by SQL text that grows with
// the request (a search with 1,000 OR'd values is ~100 KB of text and ~2 MB prepared), so a bound on
// their number alone let 1,000 distinct searches take a server from 167 MB to 895 MB.

export interface ByteLruLimits {
  /** The most bytes the entries may hold together. */
  readonly maxBytes: number;
  /** The most entries, whatever their size. */
  readonly maxEntries: number;
}

export class ByteLru<V> {
  /** In use order: the first key is the least recently used (Map keeps insertion order). */
  private readonly entries = new Map<string, { value: V; bytes: number }>();
  private heldBytes = 0;

  constructor(private readonly limits: ByteLruLimits) {}

  get bytes(): number {
    return this.heldBytes;
  }

  get size(): number {
    return this.entries.size;
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** The value, now the most recently used; undefined when not cached. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry.value;
  }

  /**
   * Caches `value` as `bytes` and answers the keys evicted to make room. A value larger than a quarter
   * of the bytes is not cached at all (answered in the list itself): it would flush everything the
   * repeated requests use for one that is rarely repeated.
   */
  set(key: string, value: V, bytes: number): string[] {
    this.delete(key);
    if (bytes > this.limits.maxBytes / 4) return [key];
    this.entries.set(key, { value, bytes });
    this.heldBytes += bytes;
    const evicted: string[] = [];
    for (const [oldest, entry] of this.entries) {
      if (this.heldBytes <= this.limits.maxBytes && this.entries.size <= this.limits.maxEntries) break;
      this.entries.delete(oldest);
      this.heldBytes -= entry.bytes;
      evicted.push(oldest);
    }
    return evicted;
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.heldBytes -= entry.bytes;
  }

  clear(): void {
    this.entries.clear();
    this.heldBytes = 0;
  }
}
