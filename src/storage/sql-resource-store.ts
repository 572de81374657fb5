import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import { fitPage, inlineContentBytes, pageContentColumns } from './page-content.js';
import { checkReferentialIntegrity } from './referential-integrity.js';
import { SerializationError, UniqueViolationError } from './sql/database.js';
import type { ReadAfter, SqlDatabase, SqlExecutor, SqlValue } from './sql/database.js';
import type { Dialect } from './sql/dialect.js';
import type {
  CurrentResource,
  DeleteOptions,
  FhirResource,
  HistoryPage,
  HistoryQuery,
  IndexWriter,
  WriteAuthor,
  ReplicaReads,
  ResourceStore,
  StoredVersion,
  UpdateOptions,
  WriteOperation,
  WriteResult,
} from './store.js';
import { resourceKey, TransactionWrites } from './transaction-writes.js';
import type { LockedRow } from './transaction-writes.js';

interface ResourceRow extends LockedRow {
  content: string | null;
}

/** Ids per statement when reading ahead. */
const READ_AHEAD_CHUNK = 500;

interface HistoryRow {
  seq: number;
  type: string;
  id: string;
  version: number;
  last_updated: number;
  operation: WriteOperation;
  content: string | null;
  /** In a history page: the content's length, the content itself left out when large (page-content.ts). */
  content_bytes?: number | null;
}

const MAX_ATTEMPTS = 5;

/**
 * The current rows of `ids` of one type, locked where the dialect locks rows. Locked rows are taken in
 * pk order, so that two transactions locking some of the same rows take them in the same order; where
 * nothing is locked (SQLite: one writer) there is no order, which would make SQLite walk every row of
 * the type in pk order instead of probing (type, id) for each id (a 1M import spent most of its time so).
 */
export function readAheadStatement(
  dialect: Dialect,
  type: string,
  ids: readonly string[],
): { sql: string; params: SqlValue[] } {
  const locked = dialect.forUpdate ? ` ORDER BY pk${dialect.forUpdate}` : '';
  return {
    sql: `SELECT pk, type, id, version, last_updated, deleted FROM resource WHERE type = ? AND id IN (${dialect.jsonTexts})${locked}`,
    params: [type, JSON.stringify(ids)],
  };
}

/**
 * The resource JSON as stored and served: resourceType, id and meta first (as FHIR servers print them),
 * with the server's versionId and lastUpdated replacing whatever the client sent.
 */
export function serializeResource(resource: FhirResource, id: string, versionId: number, lastUpdated: number): string {
  const { resourceType, id: _ignoredId, meta, ...rest } = resource;
  const { versionId: _v, lastUpdated: _l, ...clientMeta } = (meta ?? {}) as Record<string, unknown>;
  return JSON.stringify({
    resourceType,
    id,
    meta: { versionId: String(versionId), lastUpdated: new Date(lastUpdated).toISOString(), ...clientMeta },
    ...rest,
  });
}

function toVersion(row: HistoryRow): StoredVersion {
  return {
    type: row.type,
    id: row.id,
    versionId: row.version,
    lastUpdated: row.last_updated,
    operation: row.operation,
    content: row.content,
  };
}

export class SqlResourceStore implements ResourceStore {
  /**
   * @param db the database, or the executor of an open transaction (see transaction()): then every
   *   method runs inside that transaction and retries are left to whoever opened it.
   */
  constructor(
    private readonly db: SqlDatabase | SqlExecutor,
    private readonly indexWriters: readonly IndexWriter[] = [],
    private readonly clock: () => number = Date.now,
    /** AMBIENT_REFERENTIAL_INTEGRITY: check references before each transaction commits. */
    private readonly referentialIntegrity = false,
    /** For a store bound to an open transaction: that transaction (`db` is the same object). */
    private readonly writes?: TransactionWrites,
    /** Whom the index writers record as the writer. */
    private readonly author?: WriteAuthor,
  ) {}

  writingAs(author: WriteAuthor): ResourceStore {
    return new SqlResourceStore(this.db, this.indexWriters, this.clock, this.referentialIntegrity, this.writes, author);
  }

  async transaction<T>(fn: (store: ResourceStore, tx: SqlExecutor) => Promise<T>): Promise<T> {
    if (this.writes) return fn(this, this.writes);
    return this.inNewTransaction(fn);
  }

  /** Runs one write: in the open transaction, or in a new one (with its own integrity check). */
  private write<T>(fn: (writes: TransactionWrites) => Promise<T>): Promise<T> {
    if (this.writes) return fn(this.writes);
    return this.inNewTransaction((_bound, writes) => fn(writes));
  }

  /**
   * A new transaction (retried on conflicts) with a store bound to it; its held-back creates are written
   * and integrity is checked before it commits.
   */
  private inNewTransaction<T>(fn: (bound: SqlResourceStore, writes: TransactionWrites) => Promise<T>): Promise<T> {
    return this.writeWithRetry(async (tx) => {
      const writes = new TransactionWrites(tx);
      const result = await fn(
        new SqlResourceStore(writes, this.indexWriters, this.clock, this.referentialIntegrity, writes, this.author),
        writes,
      );
      await writes.flush();
      if (this.referentialIntegrity) await checkReferentialIntegrity(writes);
      return result;
    });
  }

  async create(resource: FhirResource, options: { id?: string } = {}): Promise<WriteResult> {
    const id = options.id ?? randomUUID();
    // Where the backend writes a create in one statement, that statement is atomic by itself: outside a
    // transaction, and with no integrity check to run before a commit, it needs no BEGIN and COMMIT.
    if (!this.writes && !this.referentialIntegrity && this.db.dialect.createIsOneStatement) {
      const alone = new TransactionWrites(this.db);
      const result = await this.insertNew(alone, resource, id);
      await alone.flush();
      return result;
    }
    return this.write((writes) => this.insertNew(writes, resource, id));
  }

  async readAhead(keys: readonly { type: string; id: string }[]): Promise<void> {
    const writes = this.writes;
    if (!writes) return;
    const idsByType = new Map<string, string[]>();
    for (const { type, id } of keys) {
      if (writes.current.has(resourceKey(type, id))) continue;
      const ids = idsByType.get(type) ?? [];
      ids.push(id);
      idsByType.set(type, ids);
    }
    for (const [type, ids] of idsByType) {
      for (let start = 0; start < ids.length; start += READ_AHEAD_CHUNK) {
        const chunk = ids.slice(start, start + READ_AHEAD_CHUNK);
        const { sql, params } = readAheadStatement(this.db.dialect, type, chunk);
        const rows = await writes.query<LockedRow>(sql, params);
        for (const id of chunk) writes.current.set(resourceKey(type, id), null);
        for (const row of rows) writes.current.set(resourceKey(row.type, row.id), row);
      }
    }
  }

  async read(
    type: string,
    id: string,
    options: { lock?: boolean } & ReplicaReads = {},
  ): Promise<CurrentResource | undefined> {
    const [row] = await this.reader(options.lock ? undefined : options.readAfter)<ResourceRow>(
      `SELECT pk, type, id, version, last_updated, deleted, content FROM resource WHERE type = ? AND id = ?${
        options.lock ? this.db.dialect.forUpdate : ''
      }`,
      [type, id],
    );
    if (!row) return undefined;
    return {
      type: row.type,
      id: row.id,
      versionId: row.version,
      lastUpdated: row.last_updated,
      operation: row.deleted ? 'delete' : row.version === 1 ? 'create' : 'update',
      content: row.content,
      deleted: row.deleted === 1,
    };
  }

  async vread(
    type: string,
    id: string,
    versionId: number,
    options: ReplicaReads = {},
  ): Promise<StoredVersion | undefined> {
    const [row] = await this.reader(options.readAfter)<HistoryRow>(
      `SELECT h.seq, h.type, h.id, h.version, h.last_updated, h.operation, h.content
         FROM resource r JOIN resource_history h ON h.pk = r.pk
        WHERE r.type = ? AND r.id = ? AND h.version = ?`,
      [type, id, versionId],
    );
    return row ? toVersion(row) : undefined;
  }

  async update(resource: FhirResource & { id: string }, options: UpdateOptions = {}): Promise<WriteResult> {
    return this.write(async (writes) => {
      const current = await this.lockCurrent(writes, resource.resourceType, resource.id);
      if (!current) {
        if (options.ifMatch !== undefined) {
          throw new AppError('precondition-failed', `${resource.resourceType}/${resource.id} does not exist`);
        }
        return this.insertNew(writes, resource, resource.id);
      }
      if (options.ifMatch !== undefined && options.ifMatch !== current.version) {
        throw new AppError(
          'precondition-failed',
          `Version conflict: If-Match names version ${options.ifMatch}, the current version is ${current.version}`,
        );
      }
      const stored = await this.writeVersion(writes, current, 'update', resource);
      return { stored, created: current.deleted === 1 };
    });
  }

  async delete(type: string, id: string, options: DeleteOptions = {}): Promise<StoredVersion | undefined> {
    return this.write(async (writes) => {
      const current = await this.lockCurrent(writes, type, id);
      if (!current) return undefined;
      if (current.deleted === 1) {
        return {
          type,
          id,
          versionId: current.version,
          lastUpdated: current.last_updated,
          operation: 'delete' as const,
          content: null,
        };
      }
      const deleted = await this.writeVersion(writes, current, 'delete', null);
      if (options.mayName) writes.deleted[writes.deleted.length - 1].mayName = options.mayName;
      return deleted;
    });
  }

  async history(query: HistoryQuery): Promise<HistoryPage> {
    const where: string[] = [];
    const params: (string | number)[] = [];
    const read = this.reader(query.readAfter);
    if (query.type && query.id) {
      const [row] = await read<{ pk: number }>('SELECT pk FROM resource WHERE type = ? AND id = ?', [
        query.type,
        query.id,
      ]);
      if (!row) return { versions: [] };
      where.push('pk = ?');
      params.push(row.pk);
    } else if (query.type) {
      where.push('type = ?');
      params.push(query.type);
    }
    if (query.since !== undefined) {
      where.push('last_updated >= ?');
      params.push(query.since);
    }
    if (query.after) {
      where.push('(last_updated < ? OR (last_updated = ? AND seq < ?))');
      params.push(query.after.lastUpdated, query.after.lastUpdated, query.after.seq);
    }
    const rows = await read<HistoryRow>(
      `SELECT seq, type, id, version, last_updated, operation, ${pageContentColumns('h')} FROM resource_history h
        ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
        ORDER BY last_updated DESC, seq DESC LIMIT ?`,
      [inlineContentBytes(query.maxBytes ?? Infinity, query.count + 1), ...params, query.count + 1],
    );
    // Versions never change: one the page statement left out is there to fetch, on the primary if this
    // read's replica has not replayed it yet.
    const fetch = async (row: HistoryRow) => {
      const statement = 'SELECT content FROM resource_history WHERE seq = ?';
      const [version] = await read<{ content: string }>(statement, [row.seq]);
      return version?.content ?? (await this.db.query<{ content: string }>(statement, [row.seq]))[0]?.content;
    };
    const budget = { remaining: query.maxBytes ?? Number.POSITIVE_INFINITY };
    const page = await fitPage(rows.slice(0, query.count), budget, fetch, true);
    const last = page.rows[page.rows.length - 1];
    return {
      versions: page.rows.map(toVersion),
      next:
        (rows.length > query.count || page.cut !== undefined) && last
          ? { lastUpdated: last.last_updated, seq: last.seq }
          : undefined,
    };
  }

  /**
   * How a read runs: on a replica that has replayed `readAfter` where the caller gives one (outside a
   * transaction), else as any statement of this store.
   */
  private reader(readAfter: ReadAfter | undefined): <T>(sql: string, params: readonly SqlValue[]) => Promise<T[]> {
    const db = this.db;
    if (readAfter && !this.writes && 'replicaQuery' in db) {
      return (sql, params) => db.replicaQuery(sql, params, readAfter);
    }
    return (sql, params) => db.query(sql, params);
  }

  /** The row, locked until the transaction ends: as read ahead (readAhead), or read now. */
  private async lockCurrent(writes: TransactionWrites, type: string, id: string): Promise<LockedRow | undefined> {
    const key = resourceKey(type, id);
    const ahead = writes.current.get(key);
    if (ahead !== undefined) {
      // Taken out: this write changes the row, so a later read in this transaction must see it anew.
      writes.current.delete(key);
      return ahead ?? undefined;
    }
    const [row] = await writes.query<LockedRow>(
      `SELECT pk, type, id, version, last_updated, deleted FROM resource WHERE type = ? AND id = ?${writes.dialect.forUpdate}`,
      [type, id],
    );
    return row;
  }

  /** Holds the create back in the transaction (TransactionWrites): written with its next statement. */
  private async insertNew(writes: TransactionWrites, resource: FhirResource, id: string): Promise<WriteResult> {
    const now = this.clock();
    const content = serializeResource(resource, id, 1, now);
    // Indexed as stored (with its id and meta): the rows are extracted before anything is written.
    const stored = JSON.parse(content) as FhirResource;
    const rows = this.indexWriters.flatMap((writer) => writer.newRows(resource.resourceType, stored, this.author));
    await writes.create({ type: resource.resourceType, id, lastUpdated: now, content, rows });
    return {
      stored: { type: resource.resourceType, id, versionId: 1, lastUpdated: now, operation: 'create', content },
      created: true,
    };
  }

  private async writeVersion(
    tx: TransactionWrites,
    current: LockedRow,
    operation: 'update' | 'delete',
    resource: FhirResource | null,
  ): Promise<StoredVersion> {
    const version = current.version + 1;
    // lastUpdated never goes backwards for one resource, even if the clock does.
    const now = Math.max(this.clock(), current.last_updated);
    const content = resource ? serializeResource(resource, current.id, version, now) : null;
    await tx.execute('UPDATE resource SET version = ?, last_updated = ?, deleted = ?, content = ? WHERE pk = ?', [
      version,
      now,
      resource ? 0 : 1,
      content,
      current.pk,
    ]);
    if (resource) tx.written.add(current.pk);
    else tx.deleted.push({ type: current.type, id: current.id });
    await this.appendHistory(tx, current.pk, current.type, current.id, version, now, operation, content);
    const indexed = content ? (JSON.parse(content) as FhirResource) : null;
    for (const writer of this.indexWriters) await writer.write(tx, current.pk, current.type, indexed, this.author);
    return { type: current.type, id: current.id, versionId: version, lastUpdated: now, operation, content };
  }

  private async appendHistory(
    tx: SqlExecutor,
    pk: number,
    type: string,
    id: string,
    version: number,
    lastUpdated: number,
    operation: WriteOperation,
    content: string | null,
  ): Promise<void> {
    await tx.execute(
      'INSERT INTO resource_history (pk, type, id, version, last_updated, operation, content) VALUES (?, ?, ?, ?, ?, ?, ?)',
      [pk, type, id, version, lastUpdated, operation, content],
    );
  }

  /**
   * Two writers can race to create the same id (update-as-create) or, on PostgreSQL, deadlock; the
   * loser's transaction is rolled back and simply run again, so no acknowledged write is ever lost.
   */
  private async writeWithRetry<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    const db = this.db;
    if (!('transaction' in db)) return fn(db);
    for (let attempt = 1; ; attempt++) {
      try {
        return await db.transaction(fn);
      } catch (error) {
        const retryable = error instanceof UniqueViolationError || error instanceof SerializationError;
        if (!retryable || attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  }
}
