// Prometheus metrics on their own listener (AMBIENT_METRICS_PORT), read over HTTP as a scraper does.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';
import { startHookReceiver } from './support/hook-receiver.js';
import type { HookReceiver } from './support/hook-receiver.js';

/** The value of one sample, e.g. sample(text, 'ambient_fhir_http_requests_total', {route: '/fhir/:type'}). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(match[3]);
  }
  return undefined;
}

describe.each(BACKENDS)('metrics on %s', (backend) => {
  let t: TestApp;
  let fhir: FhirClient;
  let url: string;
  let receiver: HookReceiver;
  const scrape = async () => {
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.text();
  };

  beforeAll(async () => {
    receiver = await startHookReceiver();
    t = await startTestApp(backend, {
      AMBIENT_METRICS_PORT: '0',
      AMBIENT_SCRIBE_POLL_MS: '50',
      AMBIENT_SUBSCRIPTION_ENDPOINTS: `${receiver.base}/`,
      AMBIENT_SUBSCRIPTION_POLL_MS: '50',
    });
    fhir = await t.client();
    const address = t.app.metricsAddress();
    expect(address).toBeDefined();
    url = `http://127.0.0.1:${address!.port}/metrics`;
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  it('counts requests by route pattern, FHIR interaction and status, with a latency histogram', async () => {
    const created = await fhir.post('/fhir/Patient', { resourceType: 'Patient', name: [{ family: 'Metrics' }] });
    expect(created.statusCode).toBe(201);
    const id = created.json().id as string;
    for (let i = 0; i < 3; i++) {
      expect((await fhir.get(`/fhir/Patient/${id}`)).statusCode).toBe(200);
    }
    const missing = randomUUID();
    expect((await fhir.get(`/fhir/Patient/${missing}`)).statusCode).toBe(404);
    await fhir.get('/fhir/Patient?family=Metrics');
    await t.app.inject({ method: 'GET', url: `/no/such/${missing}` });

    const text = await scrape();
    const read = { method: 'GET', route: '/fhir/:type/:id', interaction: 'read' };
    expect(sample(text, 'ambient_fhir_http_requests_total', { ...read, status: '200' })).toBe(3);
    expect(sample(text, 'ambient_fhir_http_requests_total', { ...read, status: '404' })).toBe(1);
    expect(
      sample(text, 'ambient_fhir_http_requests_total', {
        method: 'POST',
        route: '/fhir/:type',
        interaction: 'create',
        status: '201',
      }),
    ).toBe(1);
    expect(
      sample(text, 'ambient_fhir_http_requests_total', {
        route: '/fhir/:type',
        interaction: 'search-type',
        status: '200',
      }),
    ).toBe(1);
    expect(sample(text, 'ambient_fhir_http_requests_total', { route: 'unmatched', status: '404' })).toBe(1);
    expect(sample(text, 'ambient_fhir_http_request_duration_seconds_count', read)).toBe(4);
    expect(sample(text, 'ambient_fhir_http_request_duration_seconds_bucket', { ...read, le: '+Inf' })).toBe(4);
    // Bounded labels: no id and no raw path anywhere.
    expect(text).not.toContain(id);
    expect(text).not.toContain(missing);
    expect(text).not.toContain('family=');
    // prom-client's defaults: event-loop lag and memory.
    expect(sample(text, 'nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
  });

  it('reports the database pool', async () => {
    const text = await scrape();
    if (backend === 'postgres') {
      expect(sample(text, 'ambient_fhir_pg_pool_connections', { pool: 'main' })).toBeGreaterThan(0);
      expect(sample(text, 'ambient_fhir_pg_pool_idle_connections', { pool: 'main' })).toBeGreaterThanOrEqual(0);
      expect(sample(text, 'ambient_fhir_pg_pool_waiting_requests', { pool: 'main' })).toBe(0);
    } else {
      const busy = sample(text, 'ambient_fhir_sqlite_read_workers', { state: 'busy' })!;
      const idle = sample(text, 'ambient_fhir_sqlite_read_workers', { state: 'idle' })!;
      // Started when a statement first overruns its leash on the event loop (docs/search.md).
      expect(busy + idle).toBeLessThanOrEqual(t.config.searchWorkers);
      expect(sample(text, 'ambient_fhir_sqlite_read_queue')).toBe(0);
    }
  });

  it('reports subscription deliveries and what waits for them', async () => {
    const created = await fhir.create({
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'metrics',
      criteria: 'Patient?family=Metered',
      channel: { type: 'rest-hook', endpoint: `${receiver.base}/hook` },
    });
    expect(created.statusCode, created.body).toBe(201);
    for (let i = 0; i < 200; i++) {
      const status = (await fhir.get(`/fhir/Subscription/${created.json<{ id: string }>().id}`)).json<{
        status: string;
      }>();
      if (status.status === 'active') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await fhir.create({ resourceType: 'Patient', name: [{ family: 'Metered' }] });
    await receiver.waitFor(1);
    let text = '';
    // The delivery is counted when the hook answers, and its queued row removed right after (a statement
    // later): wait for both.
    for (let i = 0; i < 200; i++) {
      text = await scrape();
      if (
        sample(text, 'ambient_fhir_subscription_deliveries_total', { outcome: 'delivered' }) === 1 &&
        sample(text, 'ambient_fhir_subscription_queue', { kind: 'notifications' }) === 0
      )
        break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(sample(text, 'ambient_fhir_subscription_deliveries_total', { outcome: 'delivered' })).toBe(1);
    expect(sample(text, 'ambient_fhir_subscription_deliveries_total', { outcome: 'failed' })).toBe(0);
    expect(sample(text, 'ambient_fhir_subscription_queue', { kind: 'writes' })).toBe(0);
    expect(sample(text, 'ambient_fhir_subscription_queue', { kind: 'notifications' })).toBe(0);
  });

  it('reports the scribe queue and the outcome of its jobs', async () => {
    const submitted = await fhir.post('/v1/ambient/api/scribe', {
      transcripts: ['Doctor: How are you? Patient: Fine, a mild cough.'],
      template_ids: [1],
    });
    expect(submitted.statusCode).toBe(202);
    let text = '';
    for (let i = 0; i < 200; i++) {
      text = await scrape();
      if (sample(text, 'ambient_fhir_scribe_jobs_total', { outcome: 'completed' }) === 1) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(sample(text, 'ambient_fhir_scribe_jobs_total', { outcome: 'completed' })).toBe(1);
    expect(sample(text, 'ambient_fhir_scribe_jobs_total', { outcome: 'failed' })).toBe(0);
    expect(sample(text, 'ambient_fhir_scribe_jobs_total', { outcome: 'retried' })).toBe(0);
    expect(sample(text, 'ambient_fhir_scribe_queue_jobs', { state: 'queued' })).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'ambient_fhir_scribe_queue_jobs', { state: 'running' })).toBeGreaterThanOrEqual(0);
    expect(
      sample(text, 'ambient_fhir_http_requests_total', {
        method: 'POST',
        route: '/v1/ambient/api/scribe',
        interaction: 'scribe.submit',
        status: '202',
      }),
    ).toBe(1);
  });

  it('the listener answers only GET /metrics', async () => {
    expect((await fetch(url.replace('/metrics', '/'))).status).toBe(404);
  });
});

describe('metrics off', () => {
  it('AMBIENT_METRICS_PORT unset: no listener, no collection', async () => {
    const t = await startTestApp('sqlite');
    try {
      expect(t.config.metricsPort).toBeUndefined();
      expect(t.app.metrics).toBeUndefined();
      expect(t.app.metricsAddress()).toBeUndefined();
    } finally {
      await t.close();
    }
  });

  it('the listener starts with the app and stops when it closes', async () => {
    const t = await startTestApp('sqlite', { AMBIENT_METRICS_PORT: '0' });
    const url = `http://127.0.0.1:${t.app.metricsAddress()!.port}/metrics`;
    expect((await fetch(url)).status).toBe(200);
    await t.close();
    await expect(fetch(url)).rejects.toThrow();
  });

  it('AMBIENT_METRICS_PORT is validated like the other ports', () => {
    expect(loadConfig({ AMBIENT_METRICS_PORT: '9464' }).metricsPort).toBe(9464);
    expect(() => loadConfig({ AMBIENT_METRICS_PORT: 'abc' })).toThrow(ConfigError);
    expect(() => loadConfig({ AMBIENT_METRICS_PORT: '70000' })).toThrow(/AMBIENT_METRICS_PORT/);
    expect(() => loadConfig({ PORT: '8080', AMBIENT_METRICS_PORT: '8080' })).toThrow(/differ from PORT/);
  });
});
