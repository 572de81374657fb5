// Keeps the subscription table in step with the Subscription resources, inside each write's transaction
// (an IndexWriter, like the search indexes): a Subscription and its row commit together. The row's owner
// is the account that wrote the resource (the store's WriteAuthor, set per FHIR request) with that
// token's scopes; a write by the server itself (its status) keeps the owner, and a subscription written
// without an account (the import command) has none and is never delivered.
import { splitCriteria } from '../fhir/subscription-input.js';
import type { SqlExecutor } from '../storage/sql/database.js';
import type { NewResourceRows } from '../storage/sql/dialect.js';
import type { FhirResource, IndexWriter, WriteAuthor } from '../storage/store.js';

const COLUMNS = [
  'pk',
  'id',
  'status',
  'resource_type',
  'criteria',
  'channel_type',
  'endpoint',
  'payload',
  'headers',
  'account_id',
  'scopes',
] as const;
const PG_TYPES = ['bigint', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text', 'text'];

/** The columns a Subscription's content decides (all but pk and the owner). */
function described(resource: FhirResource): (string | null)[] {
  const criteria = typeof resource.criteria === 'string' ? resource.criteria : '';
  const parts = splitCriteria(criteria);
  const channel = (resource.channel ?? {}) as Record<string, unknown>;
  const headers = Array.isArray(channel.header) ? channel.header.filter((h) => typeof h === 'string') : [];
  return [
    resource.id ?? '',
    typeof resource.status === 'string' ? resource.status : 'off',
    parts?.type ?? '',
    parts?.query ?? '',
    typeof channel.type === 'string' ? channel.type : '',
    typeof channel.endpoint === 'string' ? channel.endpoint : null,
    typeof channel.payload === 'string' ? channel.payload : null,
    JSON.stringify(headers),
  ];
}

/** The owner a write records: the writing account, the one already recorded (the server), or none. */
function owner(author: WriteAuthor | undefined): [string, string] | 'keep' | [null, null] {
  if (author === 'server') return 'keep';
  return author ? [author.accountId, JSON.stringify(author.scopes)] : [null, null];
}

function newOwner(author: WriteAuthor | undefined): [string | null, string | null] {
  const recorded = owner(author);
  return recorded === 'keep' ? [null, null] : recorded;
}

export class SubscriptionIndexWriter implements IndexWriter {
  async write(
    tx: SqlExecutor,
    pk: number,
    type: string,
    resource: FhirResource | null,
    author?: WriteAuthor,
  ): Promise<void> {
    if (type !== 'Subscription') return;
    if (!resource) {
      await tx.execute('DELETE FROM subscription_notification WHERE subscription_pk = ?', [pk]);
      await tx.execute('DELETE FROM subscription WHERE pk = ?', [pk]);
      return;
    }
    const values = described(resource);
    const recorded = owner(author);
    const writer = recorded === 'keep' ? undefined : recorded;
    // A new version starts its delivery afresh (a client re-enabling an errored subscription); the lease of
    // a delivery in flight stays, so that two processes never deliver it at once.
    const updated = await tx.execute(
      `UPDATE subscription SET id = ?, status = ?, resource_type = ?, criteria = ?, channel_type = ?, endpoint = ?,
         payload = ?, headers = ?, failures = 0, next_attempt = 0${writer ? ', account_id = ?, scopes = ?' : ''}
       WHERE pk = ?`,
      [...values, ...(writer ?? []), pk],
    );
    if (updated === 0) {
      await tx.execute(
        `INSERT INTO subscription (${COLUMNS.join(', ')}) VALUES (${COLUMNS.map(() => '?').join(', ')})`,
        [pk, ...values, ...(writer ?? [null, null])],
      );
    }
    if (values[1] !== 'requested' && values[1] !== 'active') {
      await tx.execute('DELETE FROM subscription_notification WHERE subscription_pk = ?', [pk]);
    }
  }

  newRows(type: string, resource: FhirResource, author?: WriteAuthor): NewResourceRows[] {
    if (type !== 'Subscription') return [];
    const [, ...columns] = COLUMNS;
    return [
      {
        table: 'subscription',
        pkColumn: 'pk',
        columns,
        pgTypes: PG_TYPES.slice(1),
        rows: [[...described(resource), ...newOwner(author)]],
      },
    ];
  }
}
