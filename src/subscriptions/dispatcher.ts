// Turns committed writes into notifications (docs/subscriptions.md), in one process at a time (the lease
// on subscription_dispatch): requested subscriptions are checked and activated, then the writes the
// trigger recorded (subscription_event) are matched against the live subscriptions of their types with
// the search engine itself, as each subscriber (its owner's scopes as of now), and the notifications
// are queued in write order in the same transaction that consumes the writes: each write is matched
// once, and a dispatcher that dies midway leaves the writes for the next.
import type { Principal } from '../auth/principal.js';
import { AppError } from '../errors.js';
import { binaryContextReadable } from '../fhir/binary.js';
import { endpointAllowed } from '../fhir/subscription-input.js';
import type { FhirServices } from '../fhir/services.js';
import type { Logger } from '../logger.js';
import type { ReadAfter, SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import { currentWritePosition } from '../storage/write-positions.js';
import type { FhirResource } from '../storage/store.js';
import { setSubscriptionStatus, subscriberRequest, subscriptionsWhere } from './subscriptions.js';
import type { SubscriberOf, SubscriptionRow } from './subscriptions.js';

/** Writes matched per pass: one statement per subscription of their types covers them. */
const DISPATCH_BATCH = 500;
/**
 * Versions of one resource, written again before they were matched, that a pass puts back in place
 * (each round one short write transaction running the criteria of the type's subscriptions); the writes
 * after the first version beyond them wait for the next pass, so that rewriting one resource many times
 * cannot make a pass long.
 */
const MAX_STALE_ROUNDS = 4;
/** Passes in a row a subscription's criteria may run out of time before it is set to error. */
const MAX_TIMEOUTS = 3;

class CriteriaTimedOutError extends Error {}

/** Requested subscriptions activated per pass. */
const ACTIVATE_BATCH = 100;
/** Websocket notifications older than this are dropped: only sockets bound when they were made get them. */
const WEBSOCKET_NOTIFICATION_TTL_MS = 60_000;

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
  /** Passes in a row in which a subscription's criteria ran out of time, by subscription pk. */
  private readonly timeouts = new Map<number, number>();

  constructor(
    private readonly db: SqlDatabase,
    private readonly services: FhirServices,
    private readonly options: DispatcherOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /**
   * One pass; answers whether there is more to do at once: it queued notifications (to send now), or
   * consumed a full batch of writes (more may wait). False when another process dispatches.
   */
  async pass(): Promise<{ queued: number; more: boolean }> {
    // An idle server only reads: the lease is a write (and on SQLite an fsync), taken when there is work.
    if (!(await this.hasWork())) return { queued: 0, more: false };
    if (!(await this.lease())) return { queued: 0, more: false };
    await this.activateRequested();
    const { queued, consumed, cut } = await this.match();
    if (this.now() - this.lastSweep > WEBSOCKET_NOTIFICATION_TTL_MS / 4) await this.sweep();
    return { queued, more: queued > 0 || cut || consumed >= DISPATCH_BATCH };
  }

  /** Writes to match, subscriptions to activate, or (when a sweep is due) notifications to sweep. */
  private async hasWork(): Promise<boolean> {
    const sweepDue = this.now() - this.lastSweep > WEBSOCKET_NOTIFICATION_TTL_MS / 4;
    const [row] = await this.db.query<{ w: number | string | boolean }>(
      `SELECT CASE WHEN EXISTS (SELECT 1 FROM subscription_event)
         OR EXISTS (SELECT 1 FROM subscription WHERE status = 'requested' OR (status = 'active' AND account_id IS NULL))
         ${sweepDue ? 'OR EXISTS (SELECT 1 FROM subscription_notification)' : ''} THEN 1 ELSE 0 END AS w`,
    );
    return Number(row?.w) === 1;
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
    // Requested ones, and active ones nobody owns (imported as active): those are refused.
    const requested = await subscriptionsWhere(
      this.db,
      `(status = 'requested' OR (status = 'active' AND account_id IS NULL)) ORDER BY pk LIMIT ?`,
      [ACTIVATE_BATCH],
    );
    for (const subscription of requested) {
      const refusal = await this.refusal(subscription);
      const from = [subscription.status];
      if (refusal) await setSubscriptionStatus(this.services, subscription.id, from, 'error', refusal);
      else await setSubscriptionStatus(this.services, subscription.id, from, 'active');
    }
  }

  /** Why a requested subscription cannot be activated, or undefined. */
  private async refusal(subscription: SubscriptionRow): Promise<string | undefined> {
    const { accountId, scopes } = subscription;
    if (accountId === null || scopes === null) {
      return 'This Subscription was written without an account (the import command): write it again through the API to activate it';
    }
    const principal = await this.options.subscriberOf(accountId, scopes);
    const type = subscription.resourceType;
    const withoutAccess = ownerRefusal(principal, type);
    if (withoutAccess !== undefined) return withoutAccess;
    const request = subscriberRequest(this.services, principal!);
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

  private async match(): Promise<{ queued: number; consumed: number; cut: boolean }> {
    let events = await this.db.query<EventRow>(
      'SELECT seq, pk, type, id, version FROM subscription_event ORDER BY seq LIMIT ?',
      [DISPATCH_BATCH],
    );
    if (events.length === 0) return { queued: 0, consumed: 0, cut: false };
    let cut = false;
    // With read replicas, a search may read from one only once it has replayed these writes.
    const position = this.services.config.databaseReadUrls.length > 0 ? await currentWritePosition(this.db) : undefined;
    const readAfter = async () => position;
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
    const matcher = new BatchMatcher(this.db, this.services, subscriptions, subscriberOf, readAfter, this.timeouts);
    if (subscriptions.length > 0) {
      // Every owner looked up before any transaction opens (on an in-memory SQLite database a read waits
      // for the writer: inside one, it would wait for itself).
      await Promise.all(
        subscriptions.map((s) => (s.accountId ? subscriberOf(s.accountId, s.scopes ?? []) : undefined)),
      );
      const split = await this.splitByVersion(events);
      await matcher.match(split.fresh);
      // A resource written again while its criteria were searched: its answer may be the newer version's.
      const overtaken = (await this.splitByVersion(split.fresh)).stale;
      matcher.forget(overtaken);
      const stale = [...split.stale, ...overtaken].sort((a, b) => Number(a.seq) - Number(b.seq));
      // R4: the criteria apply to the version written. A resource written again since has another version's
      // index rows now: each such version is put back in place, matched, and the change rolled back.
      const [placedRounds, beyond] = rounds(stale, MAX_STALE_ROUNDS);
      if (beyond.length > 0) {
        // A resource written more times than that within one batch: this pass consumes the writes before
        // the first version it cannot put back, the next pass goes on from there (so order is kept).
        const first = Math.min(...beyond.map((e) => Number(e.seq)));
        events = events.filter((e) => Number(e.seq) < first);
        for (const round of placedRounds) round.splice(0, round.length, ...round.filter((e) => Number(e.seq) < first));
        cut = true;
      }
      for (const round of placedRounds) {
        if (round.length === 0) continue;
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
      if (error instanceof OvertakenError) return { queued: 0, consumed: 0, cut: false };
      throw error;
    }
    for (const [subscription, reason] of matcher.failed) {
      await setSubscriptionStatus(this.services, subscription.id, ['active'], 'error', reason);
    }
    const notified = subscriptions.filter(
      (s) => s.channelType === 'rest-hook' && events.some((e) => matcher.matched(s.pk, e)),
    );
    await this.boundPending(notified);
    return { queued: rows.length, consumed: events.length, cut };
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

  /**
   * Websocket notifications are only for the sockets bound when they were made: older ones go. So do
   * those queued for a subscription stopped or deleted while they were being matched.
   */
  private async sweep(): Promise<void> {
    this.lastSweep = this.now();
    await this.db.execute(
      `DELETE FROM subscription_notification WHERE created_at < ? AND subscription_pk IN (SELECT pk FROM subscription WHERE channel_type = 'websocket')`,
      [this.lastSweep - WEBSOCKET_NOTIFICATION_TTL_MS],
    );
    await this.db.execute(
      `DELETE FROM subscription_notification WHERE NOT EXISTS (SELECT 1 FROM subscription s WHERE s.pk = subscription_notification.subscription_pk AND s.status IN ('requested', 'active'))`,
    );
  }
}

class RolledBack extends Error {}

/** Why the owner (as of now) can no longer be told about `type`, or undefined when it can. */
function ownerRefusal(principal: Principal | undefined, type: string): string | undefined {
  if (!principal) return 'The account that wrote this Subscription is inactive or has no API access';
  if (!principal.canFhir('read', type) || !principal.canFhir('search', type)) {
    return `The scopes of the token that wrote this Subscription no longer allow reading and searching ${type}`;
  }
  return undefined;
}

async function versionContent(db: SqlExecutor, event: EventRow): Promise<string | null> {
  const [row] = await db.query<{ content: string | null }>(
    'SELECT content FROM resource_history WHERE pk = ? AND version = ?',
    [event.pk, event.version],
  );
  return row?.content ?? null;
}

/**
 * The stale events in rounds that hold at most one version of each resource (a round is placed at once),
 * at most `max` rounds; the events beyond them.
 */
function rounds(events: readonly EventRow[], max: number): [EventRow[][], EventRow[]] {
  const result: EventRow[][] = [];
  const beyond: EventRow[] = [];
  const placed = new Map<number, number>();
  for (const event of events) {
    const round = placed.get(Number(event.pk)) ?? 0;
    placed.set(Number(event.pk), round + 1);
    if (round >= max) beyond.push(event);
    else (result[round] ??= []).push(event);
  }
  // Rows locked in pk order, as every round takes them.
  for (const round of result) round.sort((a, b) => Number(a.pk) - Number(b.pk));
  return [result, beyond];
}

/**
 * Matches events against the live subscriptions of their types, each as its subscriber; remembers which
 * events (by seq) each subscription matched, and the subscriptions that can no longer match anything.
 */
class BatchMatcher {
  readonly failed: [SubscriptionRow, string][] = [];
  private readonly matches = new Map<number, Set<number>>();
  private readonly broken = new Set<number>();

  /** The content of each Binary version looked at, read once however many subscriptions match it. */
  private readonly binaries = new Map<number, Promise<string | null>>();

  constructor(
    private readonly db: SqlDatabase,
    private readonly services: FhirServices,
    private readonly subscriptions: readonly SubscriptionRow[],
    private readonly subscriberOf: SubscriberOf,
    private readonly readAfter: ReadAfter,
    /** Shared across passes: a subscription whose criteria keep timing out is broken; once is not. */
    private readonly timeouts: Map<number, number>,
  ) {}

  matched(subscriptionPk: number, event: EventRow): boolean {
    return this.matches.get(subscriptionPk)?.has(Number(event.seq)) === true;
  }

  forget(events: readonly EventRow[]): void {
    for (const seqs of this.matches.values()) for (const event of events) seqs.delete(Number(event.seq));
  }

  /**
   * `executor`: the transaction that holds the events' versions in place. The subscriptions of a type are
   * matched together, a few statements for all of them (SearchEngine.matchesAmongMany).
   */
  async match(events: readonly EventRow[], executor?: SqlExecutor): Promise<void> {
    if (events.length === 0) return;
    const byType = new Map<string, SubscriptionRow[]>();
    for (const subscription of this.subscriptions) {
      if (this.broken.has(subscription.pk)) continue;
      let group = byType.get(subscription.resourceType);
      if (!group) byType.set(subscription.resourceType, (group = []));
      group.push(subscription);
    }
    for (const [type, group] of byType) {
      const candidates = events.filter((e) => e.type === type);
      if (candidates.length === 0) continue;
      const subscribers: { subscription: SubscriptionRow; principal: Principal }[] = [];
      for (const subscription of group) {
        const principal = await this.subscriberOf(subscription.accountId!, subscription.scopes ?? []);
        const withoutAccess = ownerRefusal(principal, type);
        if (withoutAccess !== undefined) this.fail(subscription, withoutAccess);
        else subscribers.push({ subscription, principal: principal! });
      }
      const pks = [...new Set(candidates.map((e) => Number(e.pk)))];
      const items = subscribers.map(({ subscription, principal }) => ({
        request: subscriberRequest(this.services, principal, this.readAfter),
        query: subscription.criteria,
      }));
      const results = await this.services.search.matchesAmongMany(items, type, pks, executor);
      for (const [n, result] of results.entries()) {
        const { subscription, principal } = subscribers[n];
        if (result instanceof AppError) this.refused(subscription, result);
        else await this.record(subscription, principal, candidates, new Set(result), executor);
      }
    }
  }

  private fail(subscription: SubscriptionRow, reason: string): void {
    this.broken.add(subscription.pk);
    this.failed.push([subscription, reason]);
  }

  /** Criteria refused: broken, unless they only ran out of time, which is retried a few passes. */
  private refused(subscription: SubscriptionRow, error: AppError): void {
    if (error.code !== 'search-timeout') {
      this.fail(subscription, `Subscription.criteria: ${error.message}`);
      return;
    }
    const count = (this.timeouts.get(subscription.pk) ?? 0) + 1;
    this.timeouts.set(subscription.pk, count);
    // Once may be a busy moment: the writes stay queued and the next pass tries again.
    if (count < MAX_TIMEOUTS) throw new CriteriaTimedOutError();
    this.timeouts.delete(subscription.pk);
    this.fail(subscription, `Subscription.criteria ran out of time ${MAX_TIMEOUTS} times in a row: ${error.message}`);
  }

  private async record(
    subscription: SubscriptionRow,
    principal: Principal,
    candidates: readonly EventRow[],
    found: ReadonlySet<number>,
    executor: SqlExecutor | undefined,
  ): Promise<void> {
    this.timeouts.delete(subscription.pk);
    let seqs = this.matches.get(subscription.pk);
    if (!seqs) this.matches.set(subscription.pk, (seqs = new Set()));
    // A Binary is read only by who may read what its securityContext points at: the same for its notification.
    const canRead = (t: string) => principal.canFhir('read', t);
    const { references, types } = this.services;
    for (const event of candidates) {
      if (!found.has(Number(event.pk))) continue;
      if (event.type === 'Binary') {
        let read = this.binaries.get(Number(event.seq));
        if (!read) this.binaries.set(Number(event.seq), (read = versionContent(executor ?? this.db, event)));
        const content = await read;
        if (!content || !binaryContextReadable(content, references, types.resourceTypes, canRead)) continue;
      }
      seqs.add(Number(event.seq));
    }
  }
}
