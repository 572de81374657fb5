// Opt-in referential integrity (AMBIENT_REFERENTIAL_INTEGRITY=1): checked once per transaction, just
// before it commits, so references between resources written by one transaction Bundle are fine in any
// order. Reads resource_link (link-writer.ts).
import { AppError } from '../errors.js';
import type { TransactionWrites } from './transaction-writes.js';

const CHUNK = 500;
const SHOWN = 5;

/** Checks what `tx` wrote, through it: call it after the transaction's last write, before it commits. */
export async function checkReferentialIntegrity(tx: TransactionWrites): Promise<void> {
  const pks = [...tx.written];
  for (let start = 0; start < pks.length; start += CHUNK) {
    const chunk = pks.slice(start, start + CHUNK);
    const dangling = await tx.query<{ type: string; id: string; target_type: string; target_id: string }>(
      `SELECT s.type, s.id, l.target_type, l.target_id
         FROM resource_link l JOIN resource s ON s.pk = l.source_pk
        WHERE l.source_pk IN (${chunk.map(() => '?').join(', ')})
          AND NOT EXISTS (SELECT 1 FROM resource t WHERE t.type = l.target_type AND t.id = l.target_id AND t.deleted = 0)
        LIMIT ${SHOWN}`,
      chunk,
    );
    if (dangling.length > 0) {
      const list = dangling.map((d) => `${d.type}/${d.id} → ${d.target_type}/${d.target_id}`).join(', ');
      throw new AppError(
        'reference-not-found',
        `Referential integrity: these references point at no resource: ${list}`,
      );
    }
  }
  for (const target of tx.deleted) {
    const referrers = await tx.query<{ type: string; id: string }>(
      `SELECT s.type, s.id FROM resource_link l JOIN resource s ON s.pk = l.source_pk
        WHERE l.target_type = ? AND l.target_id = ? AND s.deleted = 0 LIMIT ${SHOWN}`,
      [target.type, target.id],
    );
    if (referrers.length > 0) {
      // Only referrers the deleter may read are named: a refusal must not show what its scopes hide.
      const named = referrers.filter((r) => target.mayName?.(r.type) ?? true).map((r) => `${r.type}/${r.id}`);
      const one = referrers.length === 1 && named.length === 1;
      if (named.length < referrers.length) named.push('other resources');
      throw new AppError(
        'referenced-by-others',
        `Referential integrity: ${target.type}/${target.id} cannot be deleted while ${named.join(', ')} refer${one ? 's' : ''} to it`,
      );
    }
  }
}
