// The "who saw which patient" trail: every FHIR request's access line names the account and the
// resources it returned or wrote.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

describe('access audit lines', () => {
  const lines: Record<string, unknown>[] = [];
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    t = await startTestApp('sqlite', {}, { logger });
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const accessLines = () => lines.filter((l) => l.audit === true && l.event === 'access');
  /** The access line is logged when the response has been sent, which can be just after inject resolves. */
  const accessLine = async (predicate: (line: Record<string, unknown>) => boolean) => {
    for (let i = 0; i < 100; i++) {
      const line = accessLines().find(predicate);
      if (line) return line;
      await new Promise((r) => setTimeout(r, 10));
    }
    return undefined;
  };

  it('names the resource written, read and listed in history, and never the token', async () => {
    const created = await fhir.post('/fhir/Patient', '{"resourceType":"Patient"}');
    const id = created.json().id;
    await fhir.get(`/fhir/Patient/${id}`);
    await fhir.get(`/fhir/Patient/${id}/_history`);
    await accessLine(
      (l) => l.method === 'GET' && String(l.path).endsWith('/_history') && JSON.stringify(l.ids ?? []).includes(id),
    );
    const mine = accessLines().filter((l) => JSON.stringify(l.ids ?? []).includes(id));
    expect(mine.map((l) => l.method)).toEqual(['POST', 'GET', 'GET']);
    for (const line of mine) expect(line.ids).toEqual([`Patient/${id}`]);
    const token = fhir.token!;
    expect(lines.some((l) => JSON.stringify(l).includes(token))).toBe(false);
  });

  it('names every resource a transaction wrote', async () => {
    const res = await fhir.post('/fhir', {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Basic', code: { text: 'b' } }, request: { method: 'POST', url: 'Basic' } },
      ],
    });
    const written = res
      .json()
      .entry.map((e: { response: { location: string } }) => e.response.location.replace(/\/_history\/1$/, ''));
    const line = await accessLine((l) => JSON.stringify(l.ids ?? []).includes(written[0]));
    expect(line?.ids).toEqual(written);
  });

  it('names every resource a search returned, included ones too', async () => {
    const patient = (await fhir.post('/fhir/Patient', '{"resourceType":"Patient"}')).json();
    const encounter = (
      await fhir.post('/fhir/Encounter', {
        resourceType: 'Encounter',
        status: 'finished',
        class: { code: 'AMB' },
        subject: { reference: `Patient/${patient.id}` },
      })
    ).json();
    await fhir.get(`/fhir/Patient?_id=${patient.id}&_revinclude=Encounter:patient`);
    const line = await accessLine(
      (l) => l.method === 'GET' && JSON.stringify(l.ids ?? []).includes(`Encounter/${encounter.id}`),
    );
    expect(line?.ids).toEqual([`Patient/${patient.id}`, `Encounter/${encounter.id}`]);
  });
});
