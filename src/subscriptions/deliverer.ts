// Sends rest-hook notifications (docs/subscriptions.md): a process claims a subscription with queued
// notifications (a lease on its row, so one process at a time delivers it, in queue order), sends them
// one after the other, and deletes each once the endpoint took it (2xx): at least once, in order. A
// failure stops the subscription's deliveries until its back-off has passed (doubling from
// AMBIENT_SUBSCRIPTION_RETRY_BASE_MS, at most 5 minutes); after AMBIENT_SUBSCRIPTION_MAX_ATTEMPTS failures
// in a row it is set to error. Writes never wait for any of this.
import type { Principal } from '../auth/principal.js';
import { binaryContextReadable } from '../fhir/binary.js';
import { endpointAllowed } from '../fhir/subscription-input.js';
import type { FhirServices } from '../fhir/services.js';
import type { Logger } from '../logger.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { DeliveryStoppedError, sendRestHook } from './rest-hook.js';
import type { DeliveryOutcome } from './rest-hook.js';
import { setSubscriptionStatus, subscriptionsWhere } from './subscriptions.js';
import type { SubscriberOf, SubscriptionRow } from './subscriptions.js';

/** Notifications one claim sends before the subscription is given back (others get their turn). */
const PER_CLAIM = 50;
/** Notifications read at a time; the subscription's row and its owner's access are read again before each batch. */
const BATCH = 10;
const MAX_BACKOFF_MS = 5 * 60_000;

export interface DelivererOptions {
  readonly holder: string;
  readonly workers: number;
  readonly timeoutMs: number;
  readonly maxAttempts: number;
  readonly retryBaseMs: number;
  readonly subscriberOf: SubscriberOf;
  readonly now?: () => number;
  readonly logger?: Pick<Logger, 'warn'>;
  /** Called when a claim has ended and its worker is free again: what else is due can be claimed at once. */
  readonly freed?: () => void;
  /** Called after each delivery, whatever its outcome (metrics). */
  readonly delivered?: (outcome: DeliveryOutcome) => void;
}

interface QueuedRow {
  seq: number | string;
  resource_pk: number | string;
  type: string;
  id: string;
  version: number | string;
}

export class Deliverer {
  private readonly active = new Map<number, Promise<void>>();
  private readonly stopping = new AbortController();
  private claims: Promise<void> = Promise.resolve();
  private readonly now: () => number;

  constructor(
    private readonly db: SqlDatabase,
    private readonly services: FhirServices,
    private readonly options: DelivererOptions,
  ) {
    this.now = options.now ?? Date.now;
  }

  /** The lease outlives a delivery that takes the whole time-out, with room to spare. */
  private get leaseMs(): number {
    return this.options.timeoutMs * 2 + 5_000;
  }

  /** Claims what is due, up to the free workers, and starts delivering it; one claim at a time. */
  claim(): Promise<void> {
    const run = this.claims.then(() => this.claimOnce());
    this.claims = run.catch(() => undefined);
    return run;
  }

  private async claimOnce(): Promise<void> {
    if (this.stopping.signal.aborted) return;
    const free = this.options.workers - this.active.size;
    if (free <= 0) return;
    const now = this.now();
    const due = await this.db.query<{ pk: number | string }>(
      `SELECT s.pk FROM subscription s WHERE s.status = 'active' AND s.channel_type = 'rest-hook' AND s.next_attempt <= ?
         AND (s.lease_expires IS NULL OR s.lease_expires < ?)
         AND EXISTS (SELECT 1 FROM subscription_notification n WHERE n.subscription_pk = s.pk)
       ORDER BY s.next_attempt, s.pk LIMIT ?`,
      [now, now, free + this.active.size],
    );
    for (const { pk: raw } of due) {
      const pk = Number(raw);
      if (this.active.has(pk) || this.active.size >= this.options.workers) continue;
      // Whoever sets the lease first delivers; the condition is checked again on the row as it is then.
      const claimed = await this.db.execute(
        `UPDATE subscription SET lease_holder = ?, lease_expires = ?
         WHERE pk = ? AND status = 'active' AND next_attempt <= ? AND (lease_expires IS NULL OR lease_expires < ?)`,
        [this.options.holder, now + this.leaseMs, pk, now, now],
      );
      if (claimed !== 1) continue;
      const run = this.deliver(pk).finally(() => {
        this.active.delete(pk);
        this.options.freed?.();
      });
      this.active.set(pk, run);
    }
  }

  /**
   * Stops the deliveries in flight (a stopping process) and waits for them to give their leases back:
   * what was being sent stays first in its queue, for whichever process goes on.
   */
  async stop(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.active.values()]);
  }

  get busy(): number {
    return this.active.size;
  }

  private async deliver(pk: number): Promise<void> {
    try {
      await this.deliverQueue(pk);
    } catch (error) {
      // The database went away mid-delivery, say: the lease is given back and a later claim goes on.
      if (!(error instanceof DeliveryStoppedError)) {
        this.options.logger?.warn({ err: { message: (error as Error).message } }, 'subscription delivery stopped');
      }
    } finally {
      await this.release(pk);
    }
  }

  private async deliverQueue(pk: number): Promise<void> {
    let sent = 0;
    while (sent < PER_CLAIM) {
      // The row and its owner's access as of now, for each few notifications: `off`, a new endpoint or
      // narrowed scopes apply from the next one.
      const [subscription] = await subscriptionsWhere(this.db, 'pk = ?', [pk]);
      if (!subscription || subscription.status !== 'active') return;
      const principal = await this.options.subscriberOf(subscription.accountId ?? '', subscription.scopes ?? []);
      const queued = await this.db.query<QueuedRow>(
        'SELECT seq, resource_pk, type, id, version FROM subscription_notification WHERE subscription_pk = ? ORDER BY seq LIMIT ?',
        [pk, Math.min(BATCH, PER_CLAIM - sent)],
      );
      if (queued.length === 0) break;
      for (const row of queued) {
        if (this.stopping.signal.aborted) throw new DeliveryStoppedError();
        const outcome = await this.send(subscription, row, principal);
        if (outcome !== 'dropped') this.options.delivered?.(outcome);
        if (outcome !== 'dropped' && !outcome.ok) {
          await this.failed(subscription, outcome.reason);
          return;
        }
        await this.db.execute('DELETE FROM subscription_notification WHERE seq = ?', [row.seq]);
        sent += 1;
        if (!(await this.renew(pk))) return;
      }
    }
    // Served now: it goes behind the others that wait for a worker (claims take the oldest next_attempt).
    await this.db.execute(
      'UPDATE subscription SET failures = 0, next_attempt = ?, lease_holder = NULL, lease_expires = NULL WHERE pk = ? AND lease_holder = ?',
      [this.now(), pk, this.options.holder],
    );
  }

  /** Sends one notification; 'dropped' when there is nothing its owner may be told about. */
  private async send(
    subscription: SubscriptionRow,
    row: QueuedRow,
    principal: Principal | undefined,
  ): Promise<DeliveryOutcome | 'dropped'> {
    const endpoint = subscription.endpoint ?? '';
    if (!endpointAllowed(endpoint, this.services.config.subscriptions.endpoints)) {
      return {
        ok: false,
        reason: 'Subscription.channel.endpoint is no longer under a prefix AMBIENT_SUBSCRIPTION_ENDPOINTS allows',
      };
    }
    const canRead = (t: string) => principal?.canFhir('read', t) === true;
    if (!canRead(row.type)) return 'dropped';
    // The version's content only where it is sent, or where a Binary's securityContext decides.
    const needsContent = subscription.payload !== null || row.type === 'Binary';
    let content: string | undefined;
    if (needsContent) {
      const [version] = await this.db.query<{ content: string | null }>(
        'SELECT content FROM resource_history WHERE pk = ? AND version = ?',
        [row.resource_pk, row.version],
      );
      content = version?.content ?? undefined;
      if (content === undefined) return 'dropped';
      const { references, types } = this.services;
      if (row.type === 'Binary' && !binaryContextReadable(content, references, types.resourceTypes, canRead)) {
        return 'dropped';
      }
    }
    try {
      return await sendRestHook(
        { endpoint, payload: subscription.payload, headers: subscription.headers, type: row.type, id: row.id, content },
        this.options.timeoutMs,
        this.stopping.signal,
      );
    } catch (error) {
      if (error instanceof DeliveryStoppedError) throw error;
      // Whatever else goes wrong sending it (a header the HTTP client refuses, say) is this endpoint's failure,
      // counted like any other: a notification that cannot be sent must not be retried at every poll.
      return { ok: false, reason: `the notification could not be sent (${(error as Error).message})` };
    }
  }

  private async failed(subscription: SubscriptionRow, reason: string): Promise<void> {
    const failures = subscription.failures + 1;
    if (failures >= this.options.maxAttempts) {
      await setSubscriptionStatus(
        this.services,
        subscription.id,
        ['active'],
        'error',
        `Delivery failed ${failures} times in a row; the last time ${reason}`,
      );
      return;
    }
    const backoff = Math.min(MAX_BACKOFF_MS, this.options.retryBaseMs * 2 ** (failures - 1));
    await this.db.execute(
      'UPDATE subscription SET failures = ?, next_attempt = ?, lease_holder = NULL, lease_expires = NULL WHERE pk = ? AND lease_holder = ?',
      [failures, this.now() + backoff, subscription.pk, this.options.holder],
    );
  }

  private async renew(pk: number): Promise<boolean> {
    const renewed = await this.db.execute(
      'UPDATE subscription SET lease_expires = ? WHERE pk = ? AND lease_holder = ?',
      [this.now() + this.leaseMs, pk, this.options.holder],
    );
    return renewed === 1;
  }

  private async release(pk: number): Promise<void> {
    await this.db
      .execute('UPDATE subscription SET lease_holder = NULL, lease_expires = NULL WHERE pk = ? AND lease_holder = ?', [
        pk,
        this.options.holder,
      ])
      .catch(() => undefined);
  }
}
