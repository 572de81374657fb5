// Large test databases in seconds: rows copied with SQL instead of posted through the API.
import { refreshSearchStatistics } from '../../src/search/engine.js';
import type { SqlDatabase } from '../../src/storage/sql/database.js';

/**
 * Copies one stored Patient (its row and its name index rows) `count` times with SQL, which takes a
 * second where the API would take minutes; the copies are real rows every search reads.
 */
export async function clonePatient(db: SqlDatabase, id: string, count: number): Promise<void> {
  await db.execute(
    `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?)
     INSERT INTO resource (type, id, version, last_updated, deleted, content)
     SELECT r.type, r.id || '-' || c.i, r.version, r.last_updated, 0, r.content FROM resource r, c WHERE r.type = 'Patient' AND r.id = ?`,
    [count, id],
  );
  await db.execute(
    `INSERT INTO idx_string (pk, sp, grp, norm, exact)
     SELECT r.pk, s.sp, s.grp, s.norm, s.exact FROM resource r JOIN idx_string s ON s.pk = (SELECT pk FROM resource WHERE type = 'Patient' AND id = ?)
     WHERE r.type = 'Patient' AND r.id LIKE ?`,
    [id, `${id}-%`],
  );
  // Only this schema's search tables: a database-wide ANALYZE also walks (and waits on the locks of)
  // every other test file's schema.
  await refreshSearchStatistics(db, false);
}
