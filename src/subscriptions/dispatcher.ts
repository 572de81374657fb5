// Turns committed writes into notifications (docs/subscriptions.md), in one process at a time (the lease
// on subscription_dispatch): requested subscriptions are checked and activated, then the writes the
// trigger recorded (subscription_event) are matched against the live subscriptions of their types with
// the search engine itself, as each subscriber (its owner's scopes as of now), and the notifications
// are queued in write order in the same transaction that consumes the writes: each write is matched
// once, and a dispatcher that dies midway leaves the writes for the next.
import { AppError } from '../errors.js';
import { binaryContextReadable } from '../fhir/binary.js';
import { endpointAllowed } from '../fhir/subscription-input.js';
import type { FhirServices } from '../fhir/services.js';
import type { Logger } from '../logger.js';
import type { SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import type { FhirResource } from '../storage/store.js';
import { setSubscriptionStatus, subscriberRequest, subscriptionsWhere } from './subscriptions.js';
import type { SubscriberOf, SubscriptionRow } from './subscriptions.js';

/** Writes matched per pass: one statement per subscription of their types covers them. */
export const DISPATCH_BATCH = 500;
/** Requested subscriptions activated per pass. */
const ACTIVATE_BATCH = 100;
/** Websocket notifications older than this are dropped: only sockets bound when they were made get them. */
export const WEBSOCKET_NOTIFICATION_TTL_MS = 60_000;

interface EventRow {
  seq: number | string;
  pk: number | string;
  type: string;
  id: string;
  version: number | string;
}

const NOTIFICATION_COLUMNS = ['subscription_pk', 'resource_pk', 'type', 'id', 'version', 'created_at'];
const NOTIFICATION_PG_TYPES = ['bigint', 'bigint', 'text', 'text', 'integer', 'bigint'];

class OvertakenError extends Error {}

export interface DispatcherOptions {
  readonly holder: string;
  readonly leaseMs: number;
  readonly maxPerAccount: number;
  readonly maxPending: number;
  readonly subscriberOf: SubscriberOf;
  readonly logger?: Pick<Logger, 'warn' | 'error'>;
  readonly now?: () => number;
}

export class Dispatcher {
  private readonly now: () => number;
  private lastSweep = 0;

  constructor(
    private readonly db: SqlDatabase,
    private readonly services: FhirServices,
    private readonly options: DispatcherOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** One pass; answers how many notifications it queued (0 when another process dispatches). */
  async pass(): Promise<number> {
    if (!(await this.lease())) return 0;
    await this.activateRequested();
    const queued = await this.match();
    if (this.now() - this.lastSweep > WEBSOCKET_NOTIFICATION_TTL_MS / 4) await this.sweep();
    return queued;
  }

  /** Gives the lease up (a stopping process), so that another takes over at once. */
  async release(): Promise<void> {
    await this.db.execute('UPDATE subscription_dispatch SET expires = 0 WHERE id = 1 AND holder = ?', [
      this.options.holder,
    ]);
  }

  private async lease(): Promise<boolean> {
    const now = this.now();
    const taken = await this.db.execute(
      `INSERT INTO subscription_dispatch (id, holder, expires) VALUES (1, ?, ?)
       ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, expires = excluded.expires
       WHERE subscription_dispatch.holder = excluded.holder OR subscription_dispatch.expires < ?`,
      [this.options.holder, now + this.options.leaseMs, now],
    );
    return taken === 1;
  }

  private async activateRequested(): Promise<void> {
    const requested = await subscriptionsWhere(this.db, `status = 'requested' ORDER BY pk LIMIT ?`, [ACTIVATE_BATCH]);
    for (const subscription of requested) {
      const refusal = await this.refusal(subscription);
      if (refusal) await setSubscriptionStatus(this.services, subscription.id, ['requested'], 'error', refusal);
      else await setSubscriptionStatus(this.services, subscription.id, ['requested'], 'active');
    }
  }

  /** Why a requested subscription cannot be activated, or undefined. */
  private async refusal(subscription: SubscriptionRow): Promise<string | undefined> {
    const { accountId, scopes } = subscription;
    if (accountId === null || scopes === null) {
      return 'This Subscription was written without an account (the import command): write it again through the API to activate it';
    }
    const principal = await this.options.subscriberOf(accountId, scopes);
    if (!principal) return 'The account that wrote this Subscription is inactive or has no API access';
    const request = subscriberRequest(this.services, principal);
    const type = subscription.resourceType;
    if (!principal.canFhir('read', type) || !principal.canFhir('search', type)) {
      return `The scopes of the token that wrote this Subscription no longer allow reading and searching ${type}`;
    }
    try {
      this.services.search.checkCriteria(request, type, subscription.criteria);
    } catch (error) {
      if (error instanceof AppError) return `Subscription.criteria: ${error.message}`;
      throw error;
    }
    if (
      subscription.channelType === 'rest-hook' &&
      !endpointAllowed(subscription.endpoint ?? '', this.services.config.subscriptions.endpoints)
    ) {
      return 'Subscription.channel.endpoint is not under a prefix AMBIENT_SUBSCRIPTION_ENDPOINTS allows';
    }
    const [{ n }] = await this.db.query<{ n: number | string }>(
      `SELECT COUNT(*) AS n FROM subscription WHERE account_id = ? AND status = 'active'`,
      [accountId],
    );
    if (Number(n) >= this.options.maxPerAccount) {
      return `The account already has ${this.options.maxPerAccount} active subscriptions (AMBIENT_SUBSCRIPTION_MAX_PER_ACCOUNT)`;
    }
    return undefined;
  }

  private async match(): Promise<number> {
    const events = await this.db.query<EventRow>(
      'SELECT seq, pk, type, id, version FROM subscription_event ORDER BY seq LIMIT ?',
      [DISPATCH_BATCH],
    );
    if (events.length === 0) return 0;
    const types = [...new Set(events.map((e) => e.type))];
    const subscriptions = await subscriptionsWhere(
      this.db,
      `status = 'active' AND account_id IS NOT NULL AND resource_type IN (${types.map(() => '?').join(', ')}) ORDER BY pk`,
      types,
    );
    // One account lookup per owner and scopes in a pass, however many subscriptions they have.
    const subscribers = new Map<string, ReturnType<SubscriberOf>>();
    const subscriberOf: SubscriberOf = (accountId, scopes) => {
      const key = JSON.stringify([accountId, scopes]);
      let principal = subscribers.get(key);
      if (!principal) subscribers.set(key, (principal = this.options.subscriberOf(accountId, scopes)));
      return principal;
    };
    const matcher = new BatchMatcher(this.db, this.services, subscriptions, subscriberOf);
    if (subscriptions.length > 0) {
      const split = await this.splitByVersion(events);
      await matcher.match(split.fresh);
      // A resource written again while its criteria were searched: its answer may be the newer version's.
      const overtaken = (await this.splitByVersion(split.fresh)).stale;
      matcher.forget(overtaken);
      const stale = [...split.stale, ...overtaken].sort((a, b) => Number(a.seq) - Number(b.seq));
      // R4: the criteria apply to the version written. A resource written again since has another version's
      // index rows now: each such version is put back in place, matched, and the change rolled back.
      for (const round of rounds(stale)) {
        await this.db
          .transaction(async (tx) => {
            const placed = await this.placeVersions(tx, round);
            await matcher.match(placed, tx);
            throw new RolledBack();
          })
          .catch((error: unknown) => {
            if (!(error instanceof RolledBack)) throw error;
          });
      }
    }
    const now = this.now();
    const rows: (string | number)[][] = [];
    for (const event of events) {
      for (const subscription of subscriptions) {
        if (matcher.matched(subscription.pk, event)) {
          rows.push([subscription.pk, Number(event.pk), event.type, event.id, Number(event.version), now]);
        }
      }
    }
    try {
      await this.db.transaction(async (tx) => {
        const seqs = events.map((e) => Number(e.seq));
        const consumed = await tx.execute(
          `DELETE FROM subscription_event WHERE seq IN (${seqs.map(() => '?').join(', ')})`,
          seqs,
        );
        // Another dispatcher (whose lease this one took over) consumed some of them first.
        if (consumed !== events.length) throw new OvertakenError();
        const insert = {
          table: 'subscription_notification',
          columns: NOTIFICATION_COLUMNS,
          pgTypes: NOTIFICATION_PG_TYPES,
          rows,
        };
        if (rows.length > 0) {
          for (const statement of tx.dialect.insertRows([insert])) await tx.execute(statement.sql, statement.params);
        }
      });
    } catch (error) {
      if (error instanceof OvertakenError) return 0;
      throw error;
    }
    for (const [subscription, reason] of matcher.failed) {
      await setSubscriptionStatus(this.services, subscription.id, ['active'], 'error', reason);
    }
    const notified = subscriptions.filter((s) => events.some((e) => matcher.matched(s.pk, e)));
    await this.boundPending(notified);
    return rows.length;
  }

  /** Events whose version the resource still has (its index rows are that version's), and the others. */
  private async splitByVersion(events: readonly EventRow[]): Promise<{ fresh: EventRow[]; stale: EventRow[] }> {
    if (events.length === 0) return { fresh: [], stale: [] };
    const pks = [...new Set(events.map((e) => Number(e.pk)))];
    const current = await this.db.query<{ pk: number | string; version: number | string; deleted: number | string }>(
      `SELECT pk, version, deleted FROM resource WHERE pk IN (${pks.map(() => '?').join(', ')})`,
      pks,
    );
    const live = new Map(current.map((r) => [Number(r.pk), Number(r.deleted) === 0 ? Number(r.version) : -1]));
    const fresh: EventRow[] = [];
    const stale: EventRow[] = [];
    for (const event of events) (live.get(Number(event.pk)) === Number(event.version) ? fresh : stale).push(event);
    return { fresh, stale };
  }

  /** Inside a transaction that is rolled back: each event's resource indexed as of the event's version. */
  private async placeVersions(tx: SqlExecutor, events: readonly EventRow[]): Promise<EventRow[]> {
    const placed: EventRow[] = [];
    for (const event of events) {
      const content = await versionContent(tx, event);
      if (!content) continue;
      await tx.execute('UPDATE resource SET deleted = 0 WHERE pk = ?', [event.pk]);
      const resource = JSON.parse(content) as FhirResource;
      await this.services.search.indexWriter.write(tx, Number(event.pk), event.type, resource);
      placed.push(event);
    }
    return placed;
  }

  /** A subscription whose endpoint has not taken its notifications is set to error past the bound. */
  private async boundPending(subscriptions: readonly SubscriptionRow[]): Promise<void> {
    if (subscriptions.length === 0) return;
    const pks = subscriptions.map((s) => s.pk);
    const counts = await this.db.query<{ subscription_pk: number | string; n: number | string }>(
      `SELECT subscription_pk, COUNT(*) AS n FROM subscription_notification WHERE subscription_pk IN (${pks.map(() => '?').join(', ')}) GROUP BY subscription_pk`,
      pks,
    );
    const { maxPending } = this.options;
    for (const count of counts) {
      if (Number(count.n) <= maxPending) continue;
      const subscription = subscriptions.find((s) => s.pk === Number(count.subscription_pk));
      if (!subscription) continue;
      await setSubscriptionStatus(
        this.services,
        subscription.id,
        ['active'],
        'error',
        `More than ${maxPending} notifications were waiting for delivery (AMBIENT_SUBSCRIPTION_MAX_PENDING); they were dropped`,
      );
    }
  }

  /** Websocket notifications are only for the sockets bound when they were made: older ones go. */
  private async sweep(): Promise<void> {
    this.lastSweep = this.now();
    await this.db.execute(
      `DELETE FROM subscription_notification WHERE created_at < ? AND subscription_pk IN (SELECT pk FROM subscription WHERE channel_type = 'websocket')`,
      [this.lastSweep - WEBSOCKET_NOTIFICATION_TTL_MS],
    );
  }
}

class RolledBack extends Error {}

async function versionContent(db: SqlExecutor, event: EventRow): Promise<string | null> {
  const [row] = await db.query<{ content: string | null }>(
    'SELECT content FROM resource_history WHERE pk = ? AND version = ?',
    [event.pk, event.version],
  );
  return row?.content ?? null;
}

/** The stale events in rounds that hold at most one version of each resource (a round is placed at once). */
function rounds(events: readonly EventRow[]): EventRow[][] {
  const result: EventRow[][] = [];
  const placed = new Map<number, number>();
  for (const event of events) {
    const round = placed.get(Number(event.pk)) ?? 0;
    placed.set(Number(event.pk), round + 1);
    (result[round] ??= []).push(event);
  }
  return result;
}

/**
 * Matches events against the live subscriptions of their types, each as its subscriber; remembers which
 * events (by seq) each subscription matched, and the subscriptions that can no longer match anything.
 */
class BatchMatcher {
  readonly failed: [SubscriptionRow, string][] = [];
  private readonly matches = new Map<number, Set<number>>();
  private readonly broken = new Set<number>();

  constructor(
    private readonly db: SqlDatabase,
    private readonly services: FhirServices,
    private readonly subscriptions: readonly SubscriptionRow[],
    private readonly subscriberOf: SubscriberOf,
  ) {}

  matched(subscriptionPk: number, event: EventRow): boolean {
    return this.matches.get(subscriptionPk)?.has(Number(event.seq)) === true;
  }

  forget(events: readonly EventRow[]): void {
    for (const seqs of this.matches.values()) for (const event of events) seqs.delete(Number(event.seq));
  }

  /** `executor`: the transaction that holds the events' versions in place. */
  async match(events: readonly EventRow[], executor?: SqlExecutor): Promise<void> {
    if (events.length === 0) return;
    for (const subscription of this.subscriptions) {
      if (this.broken.has(subscription.pk)) continue;
      const candidates = events.filter((e) => e.type === subscription.resourceType);
      if (candidates.length === 0) continue;
      const reason = await this.matchOne(subscription, candidates, executor);
      if (reason) {
        this.broken.add(subscription.pk);
        this.failed.push([subscription, reason]);
      }
    }
  }

  private async matchOne(
    subscription: SubscriptionRow,
    candidates: readonly EventRow[],
    executor: SqlExecutor | undefined,
  ): Promise<string | undefined> {
    const type = subscription.resourceType;
    const principal = await this.subscriberOf(subscription.accountId!, subscription.scopes ?? []);
    if (!principal) return 'The account that wrote this Subscription is inactive or has no API access';
    if (!principal.canFhir('read', type) || !principal.canFhir('search', type)) {
      return `The scopes of the token that wrote this Subscription no longer allow reading and searching ${type}`;
    }
    const request = subscriberRequest(this.services, principal);
    let found: Set<number>;
    try {
      const distinct = [...new Set(candidates.map((e) => Number(e.pk)))];
      found = new Set(
        await this.services.search.matchesAmong(request, type, subscription.criteria, distinct, executor),
      );
    } catch (error) {
      if (error instanceof AppError) return `Subscription.criteria: ${error.message}`;
      throw error;
    }
    let seqs = this.matches.get(subscription.pk);
    if (!seqs) this.matches.set(subscription.pk, (seqs = new Set()));
    // A Binary is read only by who may read what its securityContext points at: the same for its notification.
    const canRead = (t: string) => principal.canFhir('read', t);
    const { references, types } = this.services;
    for (const event of candidates) {
      if (!found.has(Number(event.pk))) continue;
      if (type === 'Binary') {
        const content = await versionContent(executor ?? this.db, event);
        if (!content || !binaryContextReadable(content, references, types.resourceTypes, canRead)) continue;
      }
      seqs.add(Number(event.seq));
    }
    return undefined;
  }
}
