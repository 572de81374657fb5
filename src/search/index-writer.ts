// Keeps the index tables in step with the resources, inside each write's transaction (called by
// SqlResourceStore): delete the resource's rows (unless it is new), then the rows of every index table
// (on PostgreSQL one statement for all tables, whatever the row count; on SQLite a multi-row INSERT per
// table, as many as its limit on bound parameters needs). Nothing is read back. A write needing more
// than MAX_INDEX_ROWS_PER_RESOURCE rows is refused (422) and rolled back. `writeBatch` does the same for many resources at once (reindex), without the limit: what is
// already stored (perhaps before the limit existed) must stay searchable.
import { MAX_INDEX_ROWS_PER_RESOURCE } from '../storage/index-limits.js';
import type { SqlExecutor, SqlValue } from '../storage/sql/database.js';
import type { NewResourceRows } from '../storage/sql/dialect.js';
import type { FhirResource, IndexWriter } from '../storage/store.js';
import type { SearchCatalog } from './catalog.js';
import type { IndexTable } from './tables.js';
import { storedColumns, storedPgTypes, storedRow, TABLE_NAMES } from './tables.js';

export class SearchIndexWriter implements IndexWriter {
  constructor(private readonly catalog: SearchCatalog) {}

  async write(tx: SqlExecutor, pk: number, type: string, resource: FhirResource | null): Promise<void> {
    for (const statement of tx.dialect.deleteByPk(TABLE_NAMES, pk)) await tx.execute(statement.sql, statement.params);
    if (!resource) return;
    await this.insert(tx, [{ pk, type, resource }], MAX_INDEX_ROWS_PER_RESOURCE);
  }

  newRows(type: string, resource: FhirResource): NewResourceRows[] {
    if (!this.catalog.registry.isResourceType(type)) return [];
    const sink = this.catalog.extract(resource as FhirResource & { resourceType: string }, MAX_INDEX_ROWS_PER_RESOURCE);
    return [...sink.rows].map(([table, rows]) => ({
      table,
      pkColumn: 'pk',
      columns: ['sp', 'grp', ...storedColumns(table)],
      pgTypes: storedPgTypes(table).slice(1),
      rows: rows.map((row) => storedRow(table, row)),
    }));
  }

  /** Rebuilds the rows of many resources (null: deleted, rows removed) in a few statements. */
  async writeBatch(
    tx: SqlExecutor,
    resources: readonly { pk: number; type: string; resource: FhirResource | null }[],
  ): Promise<number> {
    if (resources.length === 0) return 0;
    const pks = resources.map((r) => r.pk);
    for (const table of TABLE_NAMES) {
      for (let i = 0; i < pks.length; i += 500) {
        const chunk = pks.slice(i, i + 500);
        await tx.execute(`DELETE FROM ${table} WHERE pk IN (${chunk.map(() => '?').join(', ')})`, chunk);
      }
    }
    return this.insert(
      tx,
      resources.filter((r): r is { pk: number; type: string; resource: FhirResource } => r.resource !== null),
    );
  }

  private async insert(
    tx: SqlExecutor,
    resources: readonly { pk: number; type: string; resource: FhirResource }[],
    limitPerResource?: number,
  ): Promise<number> {
    const rows = new Map<IndexTable, SqlValue[][]>();
    for (const { pk, type, resource } of resources) {
      if (!this.catalog.registry.isResourceType(type)) continue;
      const sink = this.catalog.extract(resource as FhirResource & { resourceType: string }, limitPerResource);
      for (const [table, tableRows] of sink.rows) {
        let list = rows.get(table);
        if (!list) rows.set(table, (list = []));
        for (const row of tableRows) list.push([pk, ...storedRow(table, row)]);
      }
    }
    const inserts = [...rows].map(([table, tableRows]) => ({
      table,
      columns: ['pk', 'sp', 'grp', ...storedColumns(table)],
      pgTypes: storedPgTypes(table),
      rows: tableRows,
    }));
    for (const statement of tx.dialect.insertRows(inserts)) await tx.execute(statement.sql, statement.params);
    return inserts.reduce((count, insert) => count + insert.rows.length, 0);
  }
}
