// GET /fhir/$versions (https://hl7.org/fhir/R4/capabilitystatement-operation-versions.html) over HTTP
// on both databases: without a token, as plain JSON by default and for `Accept: application/json`, as a
// Parameters resource when the client asks for a FHIR format, advertised in the CapabilityStatement.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import type { FhirClient } from './support/fhir-client.js';

const PLAIN = { versions: ['4.0'], default: '4.0' };
const PARAMETERS = {
  resourceType: 'Parameters',
  parameter: [
    { name: 'version', valueString: '4.0' },
    { name: 'default', valueString: '4.0' },
  ],
};

describe.each(BACKENDS)('$versions on %s', (backend) => {
  let t: TestApp;
  let anonymous: FhirClient;
  let fhir: FhirClient;
  beforeAll(async () => {
    t = await startTestApp(backend);
    fhir = await t.client();
    anonymous = fhir.withToken(undefined);
  });
  afterAll(async () => t?.close());

  it.each([
    ['no Accept', {}, PLAIN, 'application/json'],
    ['Accept: */*', { accept: '*/*' }, PLAIN, 'application/json'],
    ['Accept: application/json', { accept: 'application/json' }, PLAIN, 'application/json'],
    ['Accept: application/fhir+json', { accept: 'application/fhir+json' }, PARAMETERS, 'application/fhir+json'],
    [
      'Accept preferring FHIR JSON',
      { accept: 'application/json;q=0.5, application/fhir+json' },
      PARAMETERS,
      'application/fhir+json',
    ],
    [
      'Accept preferring plain JSON',
      { accept: 'application/json, application/fhir+json;q=0.5' },
      PLAIN,
      'application/json',
    ],
  ])('answers %s, without a token', async (_label, headers, body, type) => {
    const res = await anonymous.get('/fhir/$versions', headers);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe(`${type}; charset=utf-8`);
    expect(res.json()).toEqual(body);
  });

  it('answers a Parameters resource for every _format of JSON, and 406 for what it cannot', async () => {
    for (const format of ['json', 'application/json', 'application/fhir+json']) {
      const res = await anonymous.get(`/fhir/$versions?_format=${encodeURIComponent(format)}`);
      expect(res.statusCode, format).toBe(200);
      expect(res.json(), format).toEqual(PARAMETERS);
    }
    expect((await anonymous.get('/fhir/$versions', { accept: 'image/png' })).statusCode).toBe(406);
    // A token is no hindrance; another method is a 405.
    expect((await fhir.get('/fhir/$versions')).json()).toEqual(PLAIN);
    expect((await fhir.post('/fhir/$versions', {})).statusCode).toBe(405);
  });

  it('answers the Parameters in XML when the client asks for XML', async () => {
    for (const headers of [{ accept: 'application/fhir+xml' }, { accept: 'application/xml' }]) {
      const res = await anonymous.get('/fhir/$versions', headers);
      expect(res.statusCode, headers.accept).toBe(200);
      expect(res.headers['content-type'], headers.accept).toBe('application/fhir+xml; charset=utf-8');
      expect(res.body).toContain('<Parameters xmlns="http://hl7.org/fhir">');
      expect(res.body).toContain('<valueString value="4.0"/>');
    }
    const xml = await anonymous.get('/fhir/$versions?_format=xml');
    expect(xml.body).toContain('<name value="default"/>');
  });

  it('is in the CapabilityStatement', async () => {
    const statement = (await anonymous.get('/fhir/metadata')).json();
    expect(statement.rest[0].operation).toContainEqual({
      name: 'versions',
      definition: 'http://hl7.org/fhir/OperationDefinition/CapabilityStatement-versions',
    });
  });
});
