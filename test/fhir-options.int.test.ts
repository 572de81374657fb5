// Configuration-dependent FHIR behaviour: FHIR's own status codes for invalid resources, and CORS.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

describe('AMBIENT_FHIR_STANDARD_STATUS=1 and CORS', () => {
  let t: TestApp;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp('sqlite', {
      AMBIENT_FHIR_STANDARD_STATUS: '1',
      AMBIENT_CORS_ORIGINS: 'https://app.example',
    });
    fhir = await t.client();
  });
  afterAll(async () => t?.close());

  const post = (resource: object) => fhir.post('/fhir/Appointment', resource);

  it('answers 400 for a resource breaking the base rules', async () => {
    const res = await post({
      resourceType: 'Appointment',
      participant: [{ actor: { reference: 'Patient/1' }, status: 'accepted' }],
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().issue.some((i: { expression?: string[] }) => i.expression?.includes('Appointment.status'))).toBe(
      true,
    );
  });

  it('answers 422 when only invariants fail', async () => {
    // app-3: only proposed or cancelled appointments may lack start and end.
    const res = await post({
      resourceType: 'Appointment',
      status: 'booked',
      participant: [{ actor: { reference: 'Patient/1' }, status: 'accepted' }],
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().issue[0].code).toBe('invariant');
  });

  it('answers CORS preflights for the configured origin only, exposing Location and ETag', async () => {
    const preflight = await t.app.inject({
      method: 'OPTIONS',
      url: '/fhir/Patient',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(String(preflight.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
    const read = await t.app.inject({
      method: 'GET',
      url: '/fhir/metadata',
      headers: { origin: 'https://app.example' },
    });
    expect(read.headers['access-control-allow-origin']).toBe('https://app.example');
    expect(String(read.headers['access-control-expose-headers'])).toContain('ETag');
    const other = await t.app.inject({
      method: 'GET',
      url: '/fhir/metadata',
      headers: { origin: 'https://evil.example' },
    });
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
  });
});
