import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import { checkReferentialIntegrity, WriteSet } from './referential-integrity.js';
import { SerializationError, UniqueViolationError } from './sql/database.js';
import type { ReadAfter, SqlDatabase, SqlExecutor, SqlValue } from './sql/database.js';
import type {
  CurrentResource,
  FhirResource,
  HistoryPage,
  HistoryQuery,
  IndexWriter,
  ReplicaReads,
  ResourceStore,
  StoredVersion,
  UpdateOptions,
  WriteOperation,
  WriteResult,
} from './store.js';

interface ResourceRow {
  pk: number;
  type: string;
  id: string;
  version: number;
  last_updated: number;
  deleted: number;
  content: string | null;
}

interface HistoryRow {
  seq: number;
  type: string;
  id: string;
  version: number;
  last_updated: number;
  operation: WriteOperation;
  content: string | null;
}

const MAX_ATTEMPTS = 5;

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
    /** For a store bound to an open transaction: what that transaction has written so far. */
    private readonly writes?: WriteSet,
  ) {}

  async transaction<T>(fn: (store: ResourceStore, tx: SqlExecutor) => Promise<T>): Promise<T> {
    if (this.writes) return fn(this, this.db as SqlExecutor);
    return this.inNewTransaction((bound, writes) => fn(bound, writes.tx));
  }

  /** Runs one write: in the open transaction, or in a new one (with its own integrity check). */
  private write<T>(fn: (tx: SqlExecutor, writes: WriteSet) => Promise<T>): Promise<T> {
    if (this.writes) return fn(this.db as SqlExecutor, this.writes);
    return this.inNewTransaction((_bound, writes) => fn(writes.tx, writes));
  }

  /** A new transaction (retried on conflicts) with a store bound to it; integrity is checked before commit. */
  private inNewTransaction<T>(fn: (bound: SqlResourceStore, writes: WriteSet) => Promise<T>): Promise<T> {
    return this.writeWithRetry(async (tx) => {
      const writes = new WriteSet(tx);
      const result = await fn(
        new SqlResourceStore(tx, this.indexWriters, this.clock, this.referentialIntegrity, writes),
        writes,
      );
      if (this.referentialIntegrity) await checkReferentialIntegrity(tx, writes);
      return result;
    });
  }

  async create(resource: FhirResource, options: { id?: string } = {}): Promise<WriteResult> {
    const id = options.id ?? randomUUID();
    // Where the backend writes a create in one statement, that statement is atomic by itself: outside a
    // transaction, and with no integrity check to run before a commit, it needs no BEGIN and COMMIT.
    if (!this.writes && !this.referentialIntegrity && this.db.dialect.createIsOneStatement) {
      return this.insertNew(this.db, new WriteSet(this.db), resource, id);
    }
    return this.write((tx, writes) => this.insertNew(tx, writes, resource, id));
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
    return this.write(async (tx, writes) => {
      const current = await this.lockCurrent(tx, resource.resourceType, resource.id);
      if (!current) {
        if (options.ifMatch !== undefined) {
          throw new AppError('precondition-failed', `${resource.resourceType}/${resource.id} does not exist`);
        }
        return this.insertNew(tx, writes, resource, resource.id);
      }
      if (options.ifMatch !== undefined && options.ifMatch !== current.version) {
        throw new AppError(
          'precondition-failed',
          `Version conflict: If-Match names version ${options.ifMatch}, the current version is ${current.version}`,
        );
      }
      const stored = await this.writeVersion(tx, writes, current, 'update', resource);
      return { stored, created: current.deleted === 1 };
    });
  }

  async delete(type: string, id: string): Promise<StoredVersion | undefined> {
    return this.write(async (tx, writes) => {
      const current = await this.lockCurrent(tx, type, id);
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
      return this.writeVersion(tx, writes, current, 'delete', null);
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
      `SELECT seq, type, id, version, last_updated, operation, content FROM resource_history
        ${where.length ? 'WHERE ' + where.join(' AND ') : ''}
        ORDER BY last_updated DESC, seq DESC LIMIT ?`,
      [...params, query.count + 1],
    );
    const page = rows.slice(0, query.count);
    const last = page[page.length - 1];
    return {
      versions: page.map(toVersion),
      next: rows.length > query.count && last ? { lastUpdated: last.last_updated, seq: last.seq } : undefined,
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

  private async lockCurrent(tx: SqlExecutor, type: string, id: string): Promise<ResourceRow | undefined> {
    const [row] = await tx.query<ResourceRow>(
      `SELECT pk, type, id, version, last_updated, deleted, content FROM resource WHERE type = ? AND id = ?${tx.dialect.forUpdate}`,
      [type, id],
    );
    return row;
  }

  private async insertNew(tx: SqlExecutor, writes: WriteSet, resource: FhirResource, id: string): Promise<WriteResult> {
    const now = this.clock();
    const content = serializeResource(resource, id, 1, now);
    // Indexed as stored (with its id and meta): the rows are extracted before anything is written.
    const stored = JSON.parse(content) as FhirResource;
    const rows = this.indexWriters.flatMap((writer) => writer.newRows(resource.resourceType, stored));
    const { insert, then } = tx.dialect.insertNewResource(resource.resourceType, id, now, content, rows);
    const [row] = await tx.query<{ pk: number | string }>(insert.sql, insert.params);
    const pk = Number(row.pk);
    for (const statement of then(pk)) await tx.execute(statement.sql, statement.params);
    writes.written.add(pk);
    return {
      stored: { type: resource.resourceType, id, versionId: 1, lastUpdated: now, operation: 'create', content },
      created: true,
    };
  }

  private async writeVersion(
    tx: SqlExecutor,
    writes: WriteSet,
    current: ResourceRow,
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
    if (resource) writes.written.add(current.pk);
    else writes.deleted.push({ type: current.type, id: current.id });
    await this.appendHistory(tx, current.pk, current.type, current.id, version, now, operation, content);
    const indexed = content ? (JSON.parse(content) as FhirResource) : null;
    for (const writer of this.indexWriters) await writer.write(tx, current.pk, current.type, indexed);
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
