// What `db copy` copies, table by table, and what it leaves out and why (docs/postgres.md, "Moving
// from SQLite"). Every table the migrations create is in exactly one of the two lists
// (copy-database.int.test.ts checks it), so a table added later is not left behind unnoticed.
import { INDEX_TABLES, storedColumns, storedPgTypes, TABLE_NAMES } from '../../search/tables.js';

export interface CopiedTable {
  readonly name: string;
  /**
   * The columns rows are read in order of (keyset pagination): the primary key, or for `grouped` tables
   * the pk of the resource the rows belong to, which several rows share.
   */
  readonly key: readonly string[];
  /** The key is not unique: a batch ends after whole groups (at most one resource's index rows more). */
  readonly grouped?: boolean;
  /** Columns whose values may be long: their bytes bound a batch, beside its row count. */
  readonly long: readonly string[];
  /** The identity column: the target numbers its next rows after the largest copied. */
  readonly identity?: string;
  /** A table the migrations give a row of their own, replaced by the source's. */
  readonly seeded?: boolean;
}

/** An index table's long columns: every text that is not a key (keys are INDEX_KEY_LENGTH at most). */
function indexTable(name: (typeof TABLE_NAMES)[number]): CopiedTable {
  const columns = storedColumns(name);
  const types = storedPgTypes(name).slice(3);
  const { keyed } = INDEX_TABLES[name];
  return {
    name,
    key: ['pk'],
    grouped: true,
    long: columns.filter((column, i) => types[i] === 'text' && !keyed.includes(column)),
  };
}

/** In this order: a table comes after the tables its foreign keys refer to. */
export const COPIED_TABLES: readonly CopiedTable[] = [
  { name: 'resource', key: ['pk'], long: ['content'], identity: 'pk' },
  { name: 'resource_history', key: ['seq'], long: ['content'], identity: 'seq' },
  ...TABLE_NAMES.map(indexTable),
  { name: 'resource_link', key: ['source_pk'], grouped: true, long: [] },
  { name: 'account', key: ['id'], long: ['jwks'] },
  { name: 'signing_key', key: ['kid'], long: [] },
  { name: 'auth_secret', key: ['name'], long: [] },
  { name: 'auth_state', key: ['id'], long: [], seeded: true },
  { name: 'search_key', key: ['id'], long: [], seeded: true },
  { name: 'client_assertion_jti', key: ['client_id', 'jti'], long: [] },
  { name: 'scribe_template', key: ['id'], long: ['definition'] },
  {
    name: 'scribe_record',
    key: ['id'],
    long: ['additional_context', 'template_ids', 'transcripts', 'notes', 'error'],
    identity: 'id',
  },
  { name: 'scribe_audio', key: ['id'], long: ['data'], identity: 'id' },
  { name: 'scribe_job', key: ['id'], long: ['progress', 'last_error'], identity: 'id' },
  // After resource_history: the trigger that records writes for subscriptions sees none while it is copied.
  { name: 'subscription', key: ['pk'], long: ['criteria', 'endpoint', 'headers', 'scopes'] },
  { name: 'profile', key: ['pk'], long: ['url', 'version', 'type'] },
];

/** The tables left out, each with what the operator should know. */
export const TABLES_NOT_COPIED: Readonly<Record<string, string>> = {
  export_job: 'Bulk Data export jobs: kick exports off again on the new database',
  export_chunk: 'the output of export jobs (on SQLite, the files beside the database)',
  account_write_position:
    "positions in the source's write-ahead log, for read-your-writes on replicas: meaningless on another database",
  schema_migration: "the target's migrations record their own",
  subscription_event: 'writes not yet matched against subscriptions: matched on the source or not at all',
  subscription_notification:
    'notifications not yet delivered: deliver them from the source before the move (its queue drains within seconds)',
  subscription_dispatch: 'which process of the source matches writes: meaningless on another database',
};
