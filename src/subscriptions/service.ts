// Subscriptions in a server process (docs/subscriptions.md): every AMBIENT_SUBSCRIPTION_POLL_MS (and at
// once after a pass that queued something) the dispatcher matches committed writes, if this process holds
// its lease; the deliverer claims what is due; the websocket hub pings its bound sockets. Every process on
// the database runs the same loop, so a notification goes out once whichever process survives.
import { randomUUID } from 'node:crypto';
import type { FhirServices } from '../fhir/services.js';
import type { Logger } from '../logger.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { Deliverer } from './deliverer.js';
import type { DeliveryOutcome } from './rest-hook.js';
import { Dispatcher } from './dispatcher.js';
import type { SubscriberOf } from './subscriptions.js';
import { WebsocketHub } from './websocket-hub.js';

const HEARTBEAT_MS = 30_000;
const DISPATCH_LEASE_MS = 5_000;

export interface SubscriptionServiceOptions {
  readonly subscriberOf: SubscriberOf;
  readonly logger?: Pick<Logger, 'warn' | 'error'>;
  readonly delivered?: (outcome: DeliveryOutcome) => void;
}

export class SubscriptionService {
  readonly hub: WebsocketHub;
  private readonly dispatcher: Dispatcher;
  private readonly deliverer: Deliverer;
  private readonly pollMs: number;
  private timer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(
    private readonly db: SqlDatabase,
    services: FhirServices,
    private readonly options: SubscriptionServiceOptions,
  ) {
    const settings = services.config.subscriptions;
    const holder = randomUUID();
    this.hub = new WebsocketHub(db);
    this.dispatcher = new Dispatcher(db, services, {
      holder,
      leaseMs: DISPATCH_LEASE_MS,
      maxPerAccount: settings.maxPerAccount,
      maxPending: settings.maxPending,
      subscriberOf: options.subscriberOf,
      logger: options.logger,
    });
    this.deliverer = new Deliverer(db, services, {
      holder,
      workers: settings.workers,
      timeoutMs: settings.timeoutMs,
      maxAttempts: settings.maxAttempts,
      retryBaseMs: settings.retryBaseMs,
      subscriberOf: options.subscriberOf,
      delivered: options.delivered,
      logger: options.logger,
      freed: () => this.claimSoon(),
    });
    this.pollMs = settings.pollMs;
  }

  start(): void {
    this.stopped = false;
    this.timer = setInterval(() => this.wake(), this.pollMs).unref();
    this.heartbeat = setInterval(() => this.hub.heartbeat(), HEARTBEAT_MS).unref();
    this.wake();
  }

  /** Runs a pass now (or right after the one running). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass().finally(() => {
      this.running = undefined;
      if (this.again && !this.stopped) {
        this.again = false;
        this.wake();
      }
    });
  }

  /**
   * A worker came free: claim what is due now rather than at the next poll (a backlog spread over many
   * subscriptions would otherwise go out at workers × a claim's batch per poll).
   */
  private claimSoon(): void {
    if (this.stopped) return;
    this.deliverer
      .claim()
      .catch((error: unknown) =>
        this.options.logger?.warn({ err: { message: (error as Error).message } }, 'subscription claim failed'),
      );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearInterval(this.heartbeat);
    this.hub.closeAll();
    await this.running;
    await this.deliverer.stop();
    await this.dispatcher.release().catch(() => undefined);
  }

  private async pass(): Promise<void> {
    try {
      const { more } = await this.dispatcher.pass();
      await this.deliverer.claim();
      await this.hub.poll();
      if (more) this.again = true;
    } catch (error) {
      // The database may be restarting: the next pass tries again. No resource content is logged.
      this.options.logger?.warn(
        { err: { message: (error as Error).message, code: (error as { code?: string }).code } },
        'subscription pass failed',
      );
    }
  }
}
