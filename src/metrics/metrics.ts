// Prometheus metrics (docs/api.md "Running it"; each metric is described in docs/operations.md). One
// registry per app (tests build many apps in one process), served by a listener of its own on
// HOST:AMBIENT_METRICS_PORT, started when the app is ready and stopped when it closes. Labels are bounded:
// route patterns, never raw paths; interaction names; status codes; no ids.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Config } from '../config.js';
import { fhirInteraction } from '../http/fhir-interaction.js';
import { accessDetailsOf } from '../auth/audit.js';
import { PostgresDatabase } from '../storage/postgres/postgres-database.js';
import type { SqlDatabase } from '../storage/sql/database.js';
import { SqliteDatabase } from '../storage/sqlite/sqlite-database.js';
import { pathOf } from '../url-parts.js';

/** What the scribe job pool reports of each job it ran. */
export type ScribeJobOutcome = 'completed' | 'failed' | 'retried' | 'lost';

/** The scribe queue as metrics read it at each scrape. */
export interface ScribeQueueSource {
  /** Jobs by state in the database (all processes): queued, running, ... */
  depth(): Promise<Record<string, number>>;
  /** Jobs running in this process now. */
  active(): number;
}

/** A scrape counts queued rows no further than this (a count is a scan). */
const QUEUE_COUNT_CAP = 100_000;

/** Latency buckets in seconds: a cached read takes ~1 ms, a search budget is 10 s by default. */
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class AppMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<'method' | 'route' | 'interaction' | 'status'>;
  private readonly duration: Histogram<'method' | 'route' | 'interaction'>;
  private readonly scribeJobs: Counter<'outcome'>;
  private readonly subscriptionDeliveries: Counter<'outcome'>;
  private scribeSource: ScribeQueueSource | undefined;

  constructor(db: SqlDatabase) {
    const registers = [this.registry];
    // Process CPU, memory (resident, heap), event-loop lag, GC, handles: prom-client's own names.
    collectDefaultMetrics({ register: this.registry });
    this.requests = new Counter({
      name: 'ambient_fhir_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern, FHIR interaction and status code',
      labelNames: ['method', 'route', 'interaction', 'status'],
      registers,
    });
    this.duration = new Histogram({
      name: 'ambient_fhir_http_request_duration_seconds',
      help: 'Time from a request arriving to its response being sent, by method, route pattern and FHIR interaction',
      labelNames: ['method', 'route', 'interaction'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.scribeJobs = new Counter({
      name: 'ambient_fhir_scribe_jobs_total',
      help: 'Scribe job attempts finished in this process, by outcome (completed, failed, retried, lost)',
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of ['completed', 'failed', 'retried', 'lost']) this.scribeJobs.inc({ outcome }, 0);
    this.subscriptionDeliveries = new Counter({
      name: 'ambient_fhir_subscription_deliveries_total',
      help: 'Rest-hook notifications this process sent, by outcome (delivered: a 2xx; failed: anything else)',
      labelNames: ['outcome'],
      registers,
    });
    for (const outcome of ['delivered', 'failed']) this.subscriptionDeliveries.inc({ outcome }, 0);
    new Gauge({
      name: 'ambient_fhir_subscription_queue',
      help: `Subscription work waiting in the database (all processes), by kind (writes: not yet matched; notifications: not yet delivered), counted up to ${QUEUE_COUNT_CAP}`,
      labelNames: ['kind'],
      registers,
      async collect() {
        const count = async (table: string) => {
          const [row] = await db
            .query<{ n: number | string }>(`SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${table} LIMIT ?) q`, [
              QUEUE_COUNT_CAP,
            ])
            .catch(() => [undefined]);
          return row ? Number(row.n) : undefined;
        };
        const writes = await count('subscription_event');
        const notifications = await count('subscription_notification');
        if (writes !== undefined) this.set({ kind: 'writes' }, writes);
        if (notifications !== undefined) this.set({ kind: 'notifications' }, notifications);
      },
    });

    if (db instanceof PostgresDatabase) {
      const pools = () => db.poolStats();
      const gauge = (name: string, help: string, value: (p: ReturnType<typeof pools>[number]) => number) =>
        new Gauge({
          name,
          help,
          labelNames: ['pool'],
          registers,
          collect() {
            this.reset();
            for (const p of pools()) this.set({ pool: p.pool }, value(p));
          },
        });
      gauge('ambient_fhir_pg_pool_connections', 'PostgreSQL connections open, by pool (main, search)', (p) => p.total);
      gauge('ambient_fhir_pg_pool_idle_connections', 'PostgreSQL connections open and idle, by pool', (p) => p.idle);
      gauge(
        'ambient_fhir_pg_pool_waiting_requests',
        'Queries waiting for a PostgreSQL connection, by pool',
        (p) => p.waiting,
      );
      this.replicaMetrics(db, registers);
    }
    if (db instanceof SqliteDatabase && db.readPool) {
      const pool = db.readPool;
      new Gauge({
        name: 'ambient_fhir_sqlite_read_workers',
        help: 'SQLite search worker threads, by state (busy: running or stopping a search; idle)',
        labelNames: ['state'],
        registers,
        collect() {
          const stats = pool.stats();
          this.set({ state: 'busy' }, stats.busy);
          this.set({ state: 'idle' }, stats.workers - stats.busy);
        },
      });
      new Gauge({
        name: 'ambient_fhir_sqlite_read_queue',
        help: 'Searches waiting for a free SQLite search worker',
        registers,
        collect() {
          this.set(pool.stats().queued);
        },
      });
    }

    const scribe = () => this.scribeSource;
    new Gauge({
      name: 'ambient_fhir_scribe_queue_jobs',
      help: 'Scribe jobs in the database queue (all processes), by state (queued, running)',
      labelNames: ['state'],
      registers,
      async collect() {
        const source = scribe();
        if (!source) return;
        const depth = await source.depth().catch(() => undefined);
        if (!depth) return;
        for (const state of ['queued', 'running']) this.set({ state }, depth[state] ?? 0);
      },
    });
    new Gauge({
      name: 'ambient_fhir_scribe_active_jobs',
      help: 'Scribe jobs running in this process now',
      registers,
      collect() {
        this.set(scribe()?.active() ?? 0);
      },
    });
  }

  /**
   * DATABASE_READ_URLS: where the reads a replica may answer went, and each replica's health and lag
   * (labelled by its place in the setting: a URL may hold a password).
   */
  private replicaMetrics(db: PostgresDatabase, registers: Registry[]): void {
    if (db.replicaStatus().length === 0) return;
    const reads = new Counter({
      name: 'ambient_fhir_pg_replica_reads_total',
      help: 'Reads a replica may answer (searches, reads by id, history, export pages), by where they went: replica, or primary and why (primary-own-write, primary-no-replica, primary-replica-failed)',
      labelNames: ['routing'],
      registers,
    });
    for (const routing of ['replica', 'primary-own-write', 'primary-no-replica', 'primary-replica-failed'] as const)
      reads.inc({ routing }, 0);
    db.observeReadRouting((routing) => reads.inc({ routing }));
    const replicas = () => db.replicaStatus();
    new Gauge({
      name: 'ambient_fhir_pg_replica_lag_seconds',
      help: 'How long ago the primary stood where each replica has replayed to (+Inf: not answering), by its place in DATABASE_READ_URLS',
      labelNames: ['replica'],
      registers,
      collect() {
        replicas().forEach((r, i) => this.set({ replica: String(i) }, r.healthy ? r.lagMs / 1000 : Infinity));
      },
    });
  }

  /** The scribe routes hand over their queue and pool. */
  observeScribe(source: ScribeQueueSource): void {
    this.scribeSource = source;
  }

  subscriptionDelivery(outcome: 'delivered' | 'failed'): void {
    this.subscriptionDeliveries.inc({ outcome });
  }

  scribeJob(outcome: ScribeJobOutcome): void {
    this.scribeJobs.inc({ outcome });
  }

  request(labels: { method: string; route: string; interaction: string; status: number }, seconds: number): void {
    const { method, route, interaction } = labels;
    this.requests.inc({ method, route, interaction, status: String(labels.status) });
    this.duration.observe({ method, route, interaction }, seconds);
  }
}

/** The HTTP methods kept as labels; anything else (a client may send any token) counts as OTHER. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

declare module 'fastify' {
  interface FastifyInstance {
    /** Undefined when AMBIENT_METRICS_PORT is unset. */
    metrics: AppMetrics | undefined;
    /** The metrics listener's address once the app is ready (tests use it with AMBIENT_METRICS_PORT=0). */
    metricsAddress: () => AddressInfo | undefined;
  }
}

/**
 * Collects the app's metrics and serves them on HOST:AMBIENT_METRICS_PORT while the app runs; does
 * nothing when the port is unset. Call before the routes are registered.
 */
export function registerMetrics(app: FastifyInstance, config: Config, db: SqlDatabase): AppMetrics | undefined {
  if (config.metricsPort === undefined) {
    app.decorate('metrics', undefined);
    app.decorate('metricsAddress', () => undefined);
    return undefined;
  }
  const metrics = new AppMetrics(db);
  let server: Server | undefined;
  app.decorate('metrics', metrics);
  app.decorate('metricsAddress', () => (server?.address() as AddressInfo | null) ?? undefined);

  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions?.url ?? 'unmatched';
    metrics.request(
      {
        method: METHODS.has(request.method) ? request.method : 'OTHER',
        route: request.is404 ? 'unmatched' : route,
        interaction: fhirInteraction(request) ?? accessDetailsOf(request)?.interaction ?? 'none',
        status: reply.statusCode,
      },
      reply.elapsedTime / 1000,
    );
    done();
  });

  app.addHook('onReady', async () => {
    const listener = createServer((req, res) => {
      const path = pathOf(req.url ?? '');
      if (req.method !== 'GET' || path !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('GET /metrics\n');
        return;
      }
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        (error: unknown) => {
          app.log.error({ err: error }, 'metrics: collection failed');
          res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics collection failed\n');
        },
      );
    });
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen({ host: config.host, port: config.metricsPort }, () => {
        listener.off('error', reject);
        resolve();
      });
    });
    server = listener;
    const address = listener.address() as AddressInfo;
    app.log.info({ address: `http://${config.host}:${address.port}/metrics` }, 'metrics listening');
  });
  app.addHook('onClose', async () => {
    if (!server) return;
    const closing = server;
    server = undefined;
    closing.closeAllConnections();
    await new Promise<void>((resolve) => closing.close(() => resolve()));
  });
  return metrics;
}
