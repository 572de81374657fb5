// Keeps resource_link in step with every write: the local references (`Type/id`, or absolute on our own
// base: ReferenceParser.local) of the current version of each resource. Contained (`#x`), urn: and
// external references are not links to resources of this server.
import type { ReferenceParser } from '../fhir/references.js';
import { MAX_INDEX_ROWS_PER_RESOURCE, tooManyIndexRows } from './index-limits.js';
import type { SqlExecutor } from './sql/database.js';
import type { NewResourceRows } from './sql/dialect.js';
import type { FhirResource, IndexWriter } from './store.js';

/** The `Type/id` pairs a resource refers to on this server, each once. */
export function localReferences(resource: FhirResource, references: ReferenceParser): { type: string; id: string }[] {
  const seen = new Set<string>();
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) return value.forEach(visit);
    if (!value || typeof value !== 'object') return;
    const object = value as Record<string, unknown>;
    // for...in over own keys, as forEachReference (fhir/references.ts) does.
    for (const key in object) {
      if (!Object.hasOwn(object, key)) continue;
      const child = object[key];
      if (key === 'reference' && typeof child === 'string') {
        const local = references.local(child);
        if (local) seen.add(`${local.type}/${local.id}`);
      } else if (child && typeof child === 'object') visit(child);
    }
  };
  visit(resource);
  return [...seen].map((ref) => {
    const slash = ref.indexOf('/');
    return { type: ref.slice(0, slash), id: ref.slice(slash + 1) };
  });
}

const LINK_COLUMNS = ['source_pk', 'target_type', 'target_id'];
const LINK_PG_TYPES = ['bigint', 'text', 'text'];

export class LinkWriter implements IndexWriter {
  constructor(private readonly references: ReferenceParser) {}

  async write(tx: SqlExecutor, pk: number, _type: string, resource: FhirResource | null): Promise<void> {
    // Refused (too many links) before anything is written.
    const links = resource ? this.links(resource) : [];
    await tx.execute('DELETE FROM resource_link WHERE source_pk = ?', [pk]);
    // Through the dialect: one statement of a fixed text on PostgreSQL (a VALUES list per link count would
    // prepare a statement per count, and stop at 65,535 parameters), chunks under SQLite's limit.
    const rows = links.map((link) => [pk, link.type, link.id]);
    const insert = { table: 'resource_link', columns: LINK_COLUMNS, pgTypes: LINK_PG_TYPES, rows };
    for (const statement of tx.dialect.insertRows([insert])) {
      await tx.execute(statement.sql, statement.params);
    }
  }

  newRows(_type: string, resource: FhirResource): NewResourceRows[] {
    const rows = this.links(resource).map((link) => [link.type, link.id]);
    const [pkColumn, ...columns] = LINK_COLUMNS;
    return [{ table: 'resource_link', pkColumn, columns, pgTypes: LINK_PG_TYPES.slice(1), rows }];
  }

  private links(resource: FhirResource): { type: string; id: string }[] {
    const links = localReferences(resource, this.references);
    if (links.length > MAX_INDEX_ROWS_PER_RESOURCE) {
      throw tooManyIndexRows(resource.resourceType, 'distinct references to resources of this server');
    }
    return links;
  }
}
