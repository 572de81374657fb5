// Keeps the profile table in step with the StructureDefinitions, inside each write's transaction (an
// IndexWriter, like the search indexes): a write naming a profile finds its current version without
// searching, and a profile updated or deleted is seen by the next write of every process.
import type { SqlExecutor } from '../storage/sql/database.js';
import type { NewResourceRows } from '../storage/sql/dialect.js';
import type { FhirResource, IndexWriter } from '../storage/store.js';

const COLUMNS = ['id', 'url', 'version', 'type'] as const;

/** The columns of a profile's row: none for a StructureDefinition that is no profile, or has no url to name it by. */
function described(resource: FhirResource): [string, string, string | null, string] | undefined {
  if (typeof resource.url !== 'string' || resource.derivation !== 'constraint') return undefined;
  const version = typeof resource.version === 'string' ? resource.version : null;
  return [resource.id ?? '', resource.url, version, typeof resource.type === 'string' ? resource.type : ''];
}

export class ProfileIndexWriter implements IndexWriter {
  async write(tx: SqlExecutor, pk: number, type: string, resource: FhirResource | null): Promise<void> {
    if (type !== 'StructureDefinition') return;
    await tx.execute('DELETE FROM profile WHERE pk = ?', [pk]);
    const values = resource && described(resource);
    if (values) {
      await tx.execute(`INSERT INTO profile (pk, ${COLUMNS.join(', ')}) VALUES (?, ?, ?, ?, ?)`, [pk, ...values]);
    }
  }

  newRows(type: string, resource: FhirResource): NewResourceRows[] {
    const values = type === 'StructureDefinition' ? described(resource) : undefined;
    if (!values) return [];
    return [
      {
        table: 'profile',
        pkColumn: 'pk',
        columns: [...COLUMNS],
        pgTypes: ['text', 'text', 'text', 'text'],
        rows: [values],
      },
    ];
  }
}
