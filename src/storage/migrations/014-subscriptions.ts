import type { Migration } from './migration.js';

// R4 Subscriptions (docs/subscriptions.md). Times are epoch milliseconds, JSON is TEXT.
// - subscription: one row per stored Subscription resource (kept in step by subscriptions/index-writer.ts
//   inside each write's transaction), with its owner (the account that last wrote it, and that token's
//   scopes) and its delivery state: consecutive failures, when the next attempt is due, and the lease of
//   the process delivering it (one at a time, so that each notification is sent once and in order).
// - subscription_event: the writes the dispatcher has still to match, filled by a trigger on
//   resource_history in the write's own transaction (so no committed write is missed, whichever path
//   wrote it: REST, Bundles, import, the scribe) and only for types some live subscription watches.
//   The dispatcher consumes rows by deleting them, never by a cursor, so a transaction that commits late
//   with a smaller seq is not skipped.
// - subscription_notification: what is matched and waits for delivery, in seq order per subscription.
// - subscription_dispatch: one row (made by the first dispatcher) whose lease makes a single process the
//   dispatcher at a time.
export const subscriptionsMigration: Migration = {
  version: 14,
  name: 'subscriptions',
  statements: (d) => [
    `CREATE TABLE subscription (
      pk ${d.bigint} PRIMARY KEY REFERENCES resource (pk),
      id TEXT NOT NULL,
      status TEXT NOT NULL,
      resource_type TEXT NOT NULL,
      criteria TEXT NOT NULL,
      channel_type TEXT NOT NULL,
      endpoint TEXT,
      payload TEXT,
      headers TEXT NOT NULL,
      account_id TEXT,
      scopes TEXT,
      failures INTEGER NOT NULL DEFAULT 0,
      next_attempt ${d.bigint} NOT NULL DEFAULT 0,
      lease_holder TEXT,
      lease_expires ${d.bigint}
    )`,
    // The trigger's question (does a live subscription watch this type?) and the dispatcher's.
    `CREATE INDEX subscription_type ON subscription (resource_type, status)`,
    `CREATE INDEX subscription_account ON subscription (account_id, status)`,
    // A websocket's bind names a subscription by id.
    `CREATE INDEX subscription_id ON subscription (id)`,
    `CREATE TABLE subscription_event (
      seq ${d.autoIncrementPrimaryKey},
      pk ${d.bigint} NOT NULL,
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      version INTEGER NOT NULL
    )`,
    `CREATE TABLE subscription_notification (
      seq ${d.autoIncrementPrimaryKey},
      subscription_pk ${d.bigint} NOT NULL,
      resource_pk ${d.bigint} NOT NULL,
      type TEXT NOT NULL,
      id TEXT NOT NULL,
      version INTEGER NOT NULL,
      created_at ${d.bigint} NOT NULL
    )`,
    `CREATE INDEX subscription_notification_queue ON subscription_notification (subscription_pk, seq)`,
    `CREATE TABLE subscription_dispatch (
      id INTEGER PRIMARY KEY,
      holder TEXT,
      expires ${d.bigint} NOT NULL
    )`,
    ...eventTrigger(d.name),
  ],
};

/** A delete notifies no one (R4); a live subscription is requested or active. */
const WATCHED = `NEW.operation <> 'delete' AND EXISTS (SELECT 1 FROM subscription s WHERE s.resource_type = NEW.type AND s.status IN ('requested', 'active'))`;
const RECORD = `INSERT INTO subscription_event (pk, type, id, version) VALUES (NEW.pk, NEW.type, NEW.id, NEW.version)`;

function eventTrigger(dialect: 'sqlite' | 'postgres'): string[] {
  if (dialect === 'sqlite') {
    return [
      `CREATE TRIGGER subscription_event_record AFTER INSERT ON resource_history
       WHEN ${WATCHED}
       BEGIN ${RECORD}; END`,
    ];
  }
  return [
    `CREATE FUNCTION subscription_event_record() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       IF ${WATCHED} THEN ${RECORD}; END IF;
       RETURN NULL;
     END $$`,
    `CREATE TRIGGER subscription_event_record AFTER INSERT ON resource_history
     FOR EACH ROW EXECUTE FUNCTION subscription_event_record()`,
  ];
}
