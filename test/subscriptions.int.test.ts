// R4 Subscriptions end to end (docs/subscriptions.md): rest-hook against a receiver the test runs,
// websocket with a real client, on both databases.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { BACKENDS } from './support/databases.js';
import type { FhirClient } from './support/fhir-client.js';
import { startHookReceiver } from './support/hook-receiver.js';
import type { HookReceiver } from './support/hook-receiver.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.each(BACKENDS)('Subscriptions on %s', (backend) => {
  let t: TestApp;
  let receiver: HookReceiver;
  let client: FhirClient;

  beforeAll(async () => {
    receiver = await startHookReceiver();
    t = await startTestApp(backend, {
      AMBIENT_SUBSCRIPTION_ENDPOINTS: `${receiver.base}/allowed`,
      AMBIENT_SUBSCRIPTION_POLL_MS: '50',
      AMBIENT_SUBSCRIPTION_RETRY_BASE_MS: '50',
      AMBIENT_SUBSCRIPTION_MAX_ATTEMPTS: '3',
    });
    client = await t.client();
  });
  afterAll(async () => {
    await t?.close();
    await receiver?.close();
  });

  const subscription = (criteria: string, channel: Record<string, unknown>) => ({
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'test',
    criteria,
    channel,
  });

  async function active(id: string, as = client): Promise<Record<string, unknown>> {
    return until(`Subscription/${id} active`, async () => {
      const res = await as.get(`/fhir/Subscription/${id}`);
      const body = res.json<Record<string, unknown>>();
      if (body.status === 'error') throw new Error(`Subscription/${id} went to error: ${String(body.error)}`);
      return body.status === 'active' ? body : undefined;
    });
  }

  it('takes a rest-hook as requested, activates it, and PUTs each matching resource in order', async () => {
    const patient = (await client.create({ resourceType: 'Patient', name: [{ family: 'Hook' }] })).json<{
      id: string;
    }>();
    const created = await client.create(
      subscription(`Observation?subject=Patient/${patient.id}&status=final`, {
        type: 'rest-hook',
        endpoint: `${receiver.base}/allowed/fhir`,
        payload: 'application/fhir+json',
        header: ['Authorization: Bearer receiver-secret', 'X-Trace: abc'],
      }),
    );
    expect(created.statusCode).toBe(201);
    const sub = created.json<{ id: string; status: string }>();
    expect(sub.status).toBe('requested');
    await active(sub.id);
    const start = receiver.received.length;
    const observation = (status: string, value: number) => ({
      resourceType: 'Observation',
      status,
      code: { text: 'heart rate' },
      subject: { reference: `Patient/${patient.id}` },
      valueQuantity: { value },
    });
    const first = (await client.create(observation('final', 1))).json<{ id: string }>();
    await client.create(observation('preliminary', 2)); // does not match
    await client.put(`/fhir/Observation/${first.id}`, { ...observation('final', 3), id: first.id });
    await client.delete(`/fhir/Observation/${first.id}`); // a delete notifies no one
    const hooks = (await receiver.waitFor(start + 2)).slice(start);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(receiver.received.length - start).toBe(2);
    expect(hooks.map((h) => [h.method, h.path])).toEqual([
      ['PUT', `/allowed/fhir/Observation/${first.id}`],
      ['PUT', `/allowed/fhir/Observation/${first.id}`],
    ]);
    expect(hooks.map((h) => JSON.parse(h.body).valueQuantity.value)).toEqual([1, 3]);
    expect(hooks.map((h) => JSON.parse(h.body).meta.versionId)).toEqual(['1', '2']);
    expect(hooks[0].headers.authorization).toBe('Bearer receiver-secret');
    expect(hooks[0].headers['x-trace']).toBe('abc');
    expect(hooks[0].headers['content-type']).toMatch(/^application\/fhir\+json/);
  });

  it('refuses an endpoint outside AMBIENT_SUBSCRIPTION_ENDPOINTS with the invalid-resource status', async () => {
    const res = await client.create(
      subscription('Patient?name=x', { type: 'rest-hook', endpoint: `${receiver.base}/elsewhere` }),
    );
    expect(res.statusCode).toBe(401);
    const outcome = res.json<{ issue: { diagnostics: string; expression: string[] }[] }>();
    expect(outcome.issue.map((i) => i.expression[0])).toContain('Subscription.channel.endpoint');
    expect(JSON.stringify(outcome)).toContain('AMBIENT_SUBSCRIPTION_ENDPOINTS');
    const search = await client.get('/fhir/Subscription?_summary=count');
    expect(search.json<{ total: number }>().total).toBe(1);
  });

  it('binds a websocket and pings per notification', async () => {
    const created = await client.create(subscription('Patient?family=Socket', { type: 'websocket' }));
    const sub = created.json<{ id: string }>();
    await active(sub.id);
    const address = t.app.server.address();
    const port =
      typeof address === 'object' && address
        ? address.port
        : (await t.app.listen({ port: 0, host: '127.0.0.1' }), (t.app.server.address() as { port: number }).port);
    const socket = new WebSocket(`ws://127.0.0.1:${port}/fhir/$subscription-websocket`, { headers: client.auth });
    const messages: string[] = [];
    socket.on('message', (data) => messages.push(data.toString()));
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    socket.send(`bind ${sub.id}`);
    await until('bound', async () => (messages.includes(`bound ${sub.id}`) ? true : undefined));
    await client.create({ resourceType: 'Patient', name: [{ family: 'Socket' }] });
    await client.create({ resourceType: 'Patient', name: [{ family: 'Other' }] });
    await client.create({ resourceType: 'Patient', name: [{ family: 'Socket' }] });
    await until('two pings', async () =>
      messages.filter((m) => m === `ping ${sub.id}`).length >= 2 ? true : undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(messages).toEqual([`bound ${sub.id}`, `ping ${sub.id}`, `ping ${sub.id}`]);
    socket.close();
  });
});
