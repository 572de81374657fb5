// One open write transaction: what it has written (for the referential integrity check before it
// commits), the current rows it has read ahead, and the creates it holds back. A transaction's creates
// are written together (Dialect.insertNewResources: one statement on PostgreSQL whatever their count)
// just before its next statement runs, or before it commits, so a transaction Bundle of a thousand
// creates costs one round trip for them, not a thousand. Every statement of the transaction goes through
// this executor, so nothing in it can read around a held-back create.
import type { SqlExecutor, SqlValue } from './sql/database.js';
import type { NewResource } from './sql/dialect.js';

/** A resource row as locked for a write (its content is not needed to write the next version). */
export interface LockedRow {
  pk: number;
  type: string;
  id: string;
  version: number;
  last_updated: number;
  deleted: number;
}

/** Held-back creates are written once this many are waiting (a bound on the statement and the memory). */
const MAX_HELD = 1000;

export const resourceKey = (type: string, id: string): string => `${type}/${id}`;

export class TransactionWrites implements SqlExecutor {
  /** The pks of the resources written (created or given a new version) by this transaction. */
  readonly written = new Set<number>();
  /** The resources deleted, each with the referrer types a refusal may name (all when absent). */
  readonly deleted: { type: string; id: string; mayName?: (type: string) => boolean }[] = [];
  /**
   * Rows read (and locked) ahead by resourceKey, null where there is no such resource. An entry is
   * taken out when it is used, so only rows nothing in this transaction has written since are kept.
   */
  readonly current = new Map<string, LockedRow | null>();
  private held: NewResource[] = [];
  private writing: Promise<void> | undefined;

  /** The transaction's own, where it has one (a search bounded on SQLite's writer), after the held creates. */
  readonly queryUntil: SqlExecutor['queryUntil'];

  constructor(private readonly tx: SqlExecutor) {
    const queryUntil = tx.queryUntil;
    if (queryUntil) {
      this.queryUntil = async <T>(sql: string, params: readonly SqlValue[], deadline: number) => {
        await this.flush();
        return queryUntil<T>(sql, params, deadline);
      };
    }
  }

  get dialect() {
    return this.tx.dialect;
  }

  async query<T>(sql: string, params?: readonly SqlValue[]): Promise<T[]> {
    await this.flush();
    return this.tx.query<T>(sql, params);
  }

  async execute(sql: string, params?: readonly SqlValue[]): Promise<number> {
    await this.flush();
    return this.tx.execute(sql, params);
  }

  /** Holds a create back until the next statement of the transaction, or until `flush`. */
  async create(resource: NewResource): Promise<void> {
    this.held.push(resource);
    if (this.held.length >= MAX_HELD) await this.flush();
  }

  /** Writes every held-back create. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
    if (this.held.length === 0) return;
    const creates = this.held;
    this.held = [];
    this.writing = this.insert(creates).finally(() => {
      this.writing = undefined;
    });
    await this.writing;
  }

  private async insert(creates: readonly NewResource[]): Promise<void> {
    const { insert, then } = this.tx.dialect.insertNewResources(creates);
    const pkByKey = new Map<string, number>();
    for (const statement of insert) {
      const rows = await this.tx.query<{ pk: number | string; type: string; id: string }>(
        statement.sql,
        statement.params,
      );
      for (const row of rows) pkByKey.set(resourceKey(row.type, row.id), Number(row.pk));
    }
    const pks = creates.map((create) => {
      const pk = pkByKey.get(resourceKey(create.type, create.id));
      if (pk === undefined) throw new Error(`The insert of ${create.type}/${create.id} answered no pk`);
      return pk;
    });
    for (const statement of then(pks)) await this.tx.execute(statement.sql, statement.params);
    for (const pk of pks) this.written.add(pk);
  }
}
