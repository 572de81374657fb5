// The storage interface every FHIR interaction talks to (the style notes principle 2). One implementation,
// SqlResourceStore, serves both SQLite and PostgreSQL through the SqlDatabase interface, so no query is
// written twice.

import type { ReadAfter, SqlExecutor } from './sql/database.js';
import type { NewResourceRows } from './sql/dialect.js';

export type FhirResource = { resourceType: string; id?: string; meta?: Record<string, unknown> } & Record<
  string,
  unknown
>;

export type WriteOperation = 'create' | 'update' | 'delete';

/** One version of a resource as stored; `content` is the JSON text exactly as served (null once deleted). */
export interface StoredVersion {
  readonly type: string;
  readonly id: string;
  readonly versionId: number;
  /** Milliseconds since the epoch. */
  readonly lastUpdated: number;
  readonly operation: WriteOperation;
  readonly content: string | null;
}

export interface CurrentResource extends StoredVersion {
  readonly deleted: boolean;
}

export interface WriteResult {
  readonly stored: StoredVersion;
  /** True when the write created the resource (create, or update-as-create). */
  readonly created: boolean;
}

export interface HistoryCursor {
  readonly lastUpdated: number;
  readonly seq: number;
}

export interface HistoryQuery {
  readonly type?: string;
  readonly id?: string;
  /** Only versions written at or after this time (ms). */
  readonly since?: number;
  readonly count: number;
  /** Continue strictly after (older than) this position. */
  readonly after?: HistoryCursor;
  /** The most bytes of stored resources the page carries (at least one version); none: no limit. */
  readonly maxBytes?: number;
  /** A replica may answer once it has replayed this (ReplicaReads). */
  readonly readAfter?: ReadAfter;
}

/**
 * A read that a streaming replica may answer (DATABASE_READ_URLS), for a request: `readAfter` gives the
 * write position of the reading account, which the replica must have replayed (read-your-writes).
 * Without it, and inside a transaction, the primary answers.
 */
export interface ReplicaReads {
  readonly readAfter?: ReadAfter;
}

export interface HistoryPage {
  readonly versions: StoredVersion[];
  /** Where the next (older) page starts, when there is one. */
  readonly next?: HistoryCursor;
}

/**
 * Who writes, where an index records it (a Subscription's owner): an account with its token's scopes, or
 * the server itself, which keeps the owner already recorded. A write without one (the import command)
 * records none.
 */
export type WriteAuthor = { readonly accountId: string; readonly scopes: readonly string[] } | 'server';

/**
 * Keeps index tables in step with the resources: called inside the write's transaction, so a resource
 * and its index rows are committed together or not at all (the search engine plugs in here).
 */
export interface IndexWriter {
  /**
   * Replaces the rows of a stored resource (an update) with those of `resource`, or removes them (null: a
   * delete). A created resource's rows come from `newRows` instead.
   */
  write(tx: SqlExecutor, pk: number, type: string, resource: FhirResource | null, author?: WriteAuthor): Promise<void>;
  /**
   * The rows a new resource adds, without its pk (not known yet): for a backend that inserts the resource
   * and all its rows in one statement (Dialect.insertNewResources). Refuses what `write` refuses.
   */
  newRows(type: string, resource: FhirResource, author?: WriteAuthor): NewResourceRows[];
}

export interface DeleteOptions {
  readonly mayName?: (type: string) => boolean;
}

export interface UpdateOptions {
  /** The version the client last saw (If-Match): the update fails with 412 when it is stale. */
  readonly ifMatch?: number;
}

export interface ResourceStore {
  /** The same store, its writes recorded as `author`'s (WriteAuthor). */
  writingAs(author: WriteAuthor): ResourceStore;
  /** Creates with a new server id, or with `options.id` (a transaction Bundle assigns ids up front). */
  create(resource: FhirResource, options?: { id?: string }): Promise<WriteResult>;
  /**
   * The current version. With `lock` inside transaction(), the row stays locked until the transaction
   * ends, so a read-modify-write (PATCH) cannot lose a concurrent update.
   */
  read(type: string, id: string, options?: { lock?: boolean } & ReplicaReads): Promise<CurrentResource | undefined>;
  vread(type: string, id: string, versionId: number, options?: ReplicaReads): Promise<StoredVersion | undefined>;
  update(resource: FhirResource & { id: string }, options?: UpdateOptions): Promise<WriteResult>;
  /**
   * Returns undefined when the resource never existed; deleting a deleted resource changes nothing.
   * `mayName`: the types of the referrers a refusal by referential integrity may name (the caller's
   * readable types); others are only counted as "other resources".
   */
  delete(type: string, id: string, options?: DeleteOptions): Promise<StoredVersion | undefined>;
  history(query: HistoryQuery): Promise<HistoryPage>;
  /**
   * Runs fn in one database transaction: every write through the store it receives commits together or
   * not at all (transaction Bundles, imports). `tx` lets index and search code read inside it.
   */
  transaction<T>(fn: (store: ResourceStore, tx: SqlExecutor) => Promise<T>): Promise<T>;
  /**
   * Inside transaction(): reads and locks, in a statement per type, the current rows of resources the
   * transaction is about to update or delete, so that each of those writes needs no read of its own
   * (a transaction Bundle of a thousand PUTs: one read, not a thousand). Outside one it does nothing.
   */
  readAhead(keys: readonly { type: string; id: string }[]): Promise<void>;
}
