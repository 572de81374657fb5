// Rebuilds the index tables from the stored resources (the `reindex` command): after an upgrade that
// changes what is indexed, or to repair them. Resources are read in pk order, in batches, each batch
// in one transaction that locks its rows, so the server can keep running and writing meanwhile.
import type { SqlDatabase } from '../storage/sql/database.js';
import type { FhirResource } from '../storage/store.js';
import type { SearchCatalog } from './catalog.js';
import { SearchIndexWriter } from './index-writer.js';

export interface ReindexOptions {
  /** Only these resource types (default: all). */
  readonly types?: readonly string[];
  /** Resources per transaction (default 500). */
  readonly batchSize?: number;
  readonly onProgress?: (progress: { resources: number; rows: number; lastPk: number }) => void;
}

export interface ReindexSummary {
  resources: number;
  rows: number;
  seconds: number;
}

export async function reindex(
  db: SqlDatabase,
  catalog: SearchCatalog,
  options: ReindexOptions = {},
): Promise<ReindexSummary> {
  const started = performance.now();
  const writer = new SearchIndexWriter(catalog);
  const batchSize = options.batchSize ?? 500;
  const types = options.types ?? [];
  const typeFilter = types.length > 0 ? ` AND type IN (${types.map(() => '?').join(', ')})` : '';
  const summary: ReindexSummary = { resources: 0, rows: 0, seconds: 0 };
  let lastPk = 0;
  for (;;) {
    const done = await db.transaction(async (tx) => {
      const rows = await tx.query<{ pk: number; type: string; deleted: number; content: string | null }>(
        `SELECT pk, type, deleted, content FROM resource WHERE pk > ?${typeFilter} ORDER BY pk LIMIT ?${tx.dialect.forUpdate}`,
        [lastPk, ...types, batchSize],
      );
      if (rows.length === 0) return true;
      summary.rows += await writer.writeBatch(
        tx,
        rows.map((r) => ({
          pk: Number(r.pk),
          type: r.type,
          resource: r.deleted || !r.content ? null : (JSON.parse(r.content) as FhirResource),
        })),
      );
      summary.resources += rows.length;
      lastPk = Number(rows[rows.length - 1].pk);
      return rows.length < batchSize;
    });
    options.onProgress?.({ resources: summary.resources, rows: summary.rows, lastPk });
    if (done) break;
  }
  summary.seconds = (performance.now() - started) / 1000;
  return summary;
}
