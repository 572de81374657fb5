// What a request body may cost before the server knows it is worth reading, as an attacker sends it over
// a real socket on both databases: a body whose scopes refuse it is refused before it is read; JSON too
// deep or too wide and forms of too many parameters are refused as the offending bytes arrive (the rest
// of the declared body is never sent, so an answer proves the server did not wait for it); the token
// endpoint's body is tiny; and the bytes of bodies held at once are bounded (503 with Retry-After past it).
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FORM_PARAMETERS } from '../src/http/body-parsers.js';
import { MAX_JSON_DEPTH, MAX_JSON_VALUES } from '../src/fhir/json-limits.js';
import { TOKEN_BODY_LIMIT } from '../src/auth/token-endpoint.js';
import { BACKENDS } from './support/databases.js';
import { FHIR_JSON, startRobustnessApp } from './support/robustness.js';
import type { TestApp } from './support/test-app.js';
import { bearer } from './support/fhir-client.js';
import type { FhirClient } from './support/fhir-client.js';

const MB = 1024 * 1024;
const FORM = 'application/x-www-form-urlencoded';
/** Generous: a correct server answers in milliseconds; one that waits for the unsent rest never does. */
const ANSWER_WITHIN_MS = 10_000;

interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * Sends a request head that declares `declaredLength` body bytes, then only `firstPart` of the body, and
 * waits for the answer (status 0: none came while the rest of the body was withheld). `hold` keeps the
 * connection open afterwards and returns the socket's destroy, for requests meant to stay in flight.
 */
function partialRequest(
  base: string,
  head: { method: string; path: string; headers: Record<string, string> },
  declaredLength: number,
  firstPart: string | Buffer,
): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const { port } = new URL(base);
    const socket = connect(Number(port), '127.0.0.1');
    let received = Buffer.alloc(0);
    let done = false;
    const finish = (answer: RawAnswer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => finish({ status: 0, headers: {}, body: '' }), ANSWER_WITHIN_MS);
    socket.on('data', (data: Buffer) => {
      received = Buffer.concat([received, data]);
      const answer = parseAnswer(received);
      if (answer) finish(answer);
    });
    socket.on('error', () => finish(parseAnswer(received) ?? { status: 0, headers: {}, body: '' }));
    socket.on('close', () => finish(parseAnswer(received) ?? { status: 0, headers: {}, body: '' }));
    socket.on('connect', () => {
      const lines = [`${head.method} ${head.path} HTTP/1.1`, 'Host: fhir.test', `Content-Length: ${declaredLength}`];
      for (const [name, value] of Object.entries(head.headers)) lines.push(`${name}: ${value}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      socket.write(firstPart);
    });
  });
}

/** A complete HTTP/1.1 answer with a Content-Length body, or undefined while incomplete. */
function parseAnswer(bytes: Buffer): RawAnswer | undefined {
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine, ...headerLines] = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of headerLines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  if (bytes.length < end + 4 + length) return undefined;
  return {
    status: Number(statusLine.split(' ')[1]),
    headers,
    body: bytes.subarray(end + 4, end + 4 + length).toString('utf8'),
  };
}

/** The error code of an OperationOutcome answer. */
function outcomeCode(answer: RawAnswer): string | undefined {
  const outcome = JSON.parse(answer.body) as { issue?: { details?: { coding?: { code?: string }[] } }[] };
  return outcome.issue?.[0]?.details?.coding?.[0]?.code;
}

describe.each(BACKENDS)('request bodies cost nothing before they are worth reading, on %s', (backend) => {
  let t: TestApp;
  let base: string;
  let binaryOnly: FhirClient;
  let everything: FhirClient;

  beforeAll(async () => {
    t = await startRobustnessApp(backend);
    binaryOnly = await t.client('system/Binary.cruds');
    everything = await t.client();
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => t?.close());

  const send = (
    method: string,
    path: string,
    client: FhirClient,
    contentType: string,
    declaredLength: number,
    firstPart: string,
    extra: Record<string, string> = {},
  ) =>
    partialRequest(
      base,
      { method, path, headers: { ...client.auth, 'Content-Type': contentType, ...extra } },
      declaredLength,
      firstPart,
    );

  it('refuses with 403 (or 404 for an unknown type) before reading a body its scopes refuse, on every body route', async () => {
    // 11.5 MiB declared, 64 KiB sent: the answer can only come from what the server knew before the body.
    const form = 'code=x&'.repeat((64 * 1024) / 7);
    const json = `{"resourceType":"Observation","note":[${'{"text":"x"},'.repeat(5000)}`;
    const cases: [string, string, string, string, number][] = [
      ['POST', '/fhir/Observation/_search', FORM, form, 403],
      ['POST', '/fhir/Observation', FHIR_JSON, json, 403],
      ['PUT', '/fhir/Observation/o1', FHIR_JSON, json, 403],
      ['PUT', '/fhir/Observation?identifier=x', FHIR_JSON, json, 403],
      ['PATCH', '/fhir/Observation/o1', 'application/json-patch+json', '[{"op":"add","path":"/x","value":[', 403],
      ['POST', '/fhir/Observation/$validate', FHIR_JSON, json, 403],
      ['POST', '/fhir/Patient/p1/Observation/_search', FORM, form, 403],
      ['POST', '/fhir/Nonsense', FHIR_JSON, json, 404],
      ['POST', '/fhir/Nonsense/_search', FORM, form, 404],
    ];
    for (const [method, path, contentType, firstPart, status] of cases) {
      const answer = await send(method, path, binaryOnly, contentType, 11.5 * MB, firstPart);
      expect(answer.status, `${method} ${path}`).toBe(status);
      expect(answer.headers['content-type'], `${method} ${path}`).toContain(FHIR_JSON);
      expect(outcomeCode(answer), `${method} ${path}`).toBe(status === 403 ? 'forbidden' : 'unknown-resource-type');
    }
    // What the scopes allow is still read whole: the same account stores a Binary.
    const binary = JSON.stringify({ resourceType: 'Binary', contentType: 'text/plain', data: 'aGVsbG8=' });
    const stored = await send('POST', '/fhir/Binary', binaryOnly, FHIR_JSON, Buffer.byteLength(binary), binary);
    expect(stored.status).toBe(201);
    expect(JSON.parse(stored.body)).toMatchObject({ resourceType: 'Binary', data: 'aGVsbG8=' });
  });

  it(`refuses JSON nested deeper than ${MAX_JSON_DEPTH} levels as the level past it arrives`, async () => {
    for (const [method, path, contentType, start] of [
      ['POST', '/fhir/Patient', FHIR_JSON, '{"resourceType":"Patient","x":'],
      ['POST', '/fhir', FHIR_JSON, '{"resourceType":"Bundle","type":"batch","entry":'],
      ['PATCH', '/fhir/Patient/p1', 'application/json-patch+json', '[{"op":"add","path":"/x","value":'],
    ]) {
      const answer = await send(method, path, everything, contentType, 16 * MB - 1, start + '['.repeat(4096));
      expect(answer.status, `${method} ${path}`).toBe(400);
      expect(outcomeCode(answer)).toBe('invalid-json');
      expect(JSON.parse(answer.body).issue[0].diagnostics).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
    }
  });

  it(`refuses JSON of more than ${MAX_JSON_VALUES.toLocaleString('en-US')} values as the one past it arrives (413)`, async () => {
    // Sent whole: 1,000,001 zeros are 2 MB.
    const wide = `{"resourceType":"Patient","x":[${'0,'.repeat(MAX_JSON_VALUES)}0]}`;
    const answer = await send('POST', '/fhir/Patient', everything, FHIR_JSON, Buffer.byteLength(wide), wide);
    expect(answer.status).toBe(413);
    expect(outcomeCode(answer)).toBe('payload-too-large');
    expect(JSON.parse(answer.body).issue[0].diagnostics).toContain('1,000,000 JSON values');
    // Half of it declared as 16 MiB: refused before the rest.
    const early = await send('POST', '/fhir/Patient', everything, FHIR_JSON, 16 * MB - 1, wide.slice(0, 2_100_000));
    expect(early.status).toBe(413);
    // Under the bound, the same shape is read and judged as a resource (x is no Patient element: 401).
    const fewer = `{"resourceType":"Patient","x":[${'0,'.repeat(1000)}0]}`;
    const judged = await send('POST', '/fhir/Patient', everything, FHIR_JSON, Buffer.byteLength(fewer), fewer);
    expect(judged.status).toBe(401);
  });

  it(`refuses a search form of more than ${MAX_FORM_PARAMETERS} parameters as the one past it arrives (413)`, async () => {
    const many = 'name=a&'.repeat(MAX_FORM_PARAMETERS + 1);
    const answer = await send('POST', '/fhir/Patient/_search', everything, FORM, 11.5 * MB, many);
    expect(answer.status).toBe(413);
    expect(outcomeCode(answer)).toBe('payload-too-large');
    expect(JSON.parse(answer.body).issue[0].diagnostics).toContain(`${MAX_FORM_PARAMETERS} parameters`);
    // A form within the bound is a search as before.
    const form = 'name=nobody-by-this-name&_count=1';
    const search = await send('POST', '/fhir/Patient/_search', everything, FORM, form.length, form);
    expect(search.status).toBe(200);
    expect(JSON.parse(search.body)).toMatchObject({ resourceType: 'Bundle', type: 'searchset' });
  });

  it(`caps a token request at ${TOKEN_BODY_LIMIT} bytes (413 in the OAuth error shape), from its Content-Length or as it arrives`, async () => {
    const declared = await partialRequest(
      base,
      { method: 'POST', path: '/v1/ambient/api/auth/token', headers: { 'Content-Type': FORM } },
      11.5 * MB,
      'username=a&password=b&' + 'x=1&'.repeat(1000),
    );
    expect(declared.status).toBe(413);
    expect(JSON.parse(declared.body)).toMatchObject({
      error: 'invalid_request',
      error_description: expect.any(String),
    });
    const fields = await t.app.inject({
      method: 'POST',
      url: '/v1/ambient/api/auth/token',
      headers: { 'content-type': FORM },
      payload: 'username=a&password=b&' + 'x=1&'.repeat(100_000),
    });
    expect(fields.statusCode).toBe(413);
    expect(fields.json()).toMatchObject({ error: 'invalid_request' });
    // A client assertion of the largest accepted size still fits.
    expect(TOKEN_BODY_LIMIT).toBeGreaterThan(16 * 1024 + 2048);
  });
});

describe.each(BACKENDS)('the bytes of request bodies held at once are bounded, on %s', (backend) => {
  const KIB = 1024;
  let t: TestApp;
  let base: string;
  let authorization: string;

  beforeAll(async () => {
    t = await startRobustnessApp(backend, {
      AMBIENT_MAX_BODY_BYTES: String(64 * KIB),
      AMBIENT_MAX_BODY_BYTES_IN_FLIGHT: String(128 * KIB),
    });
    authorization = bearer(await t.token()).authorization;
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => t?.close());

  /** A valid Patient of exactly `bytes` bytes. */
  const patientOf = (bytes: number) => {
    const start = '{"resourceType":"Patient","name":[{"family":"';
    const end = '"}]}';
    return start + 'x'.repeat(bytes - start.length - end.length) + end;
  };

  /**
   * A request that declares 60 KiB and sends 1 KiB, left open: its 60 KiB stay in flight until it closes.
   * `answered` turns true if the server refused it instead (a 503, when it arrived while a probe's body
   * was in flight): the test then replaces it.
   */
  const holder = () => {
    const { port } = new URL(base);
    const socket = connect(Number(port), '127.0.0.1');
    const held = { socket, answered: false };
    socket.on('error', () => undefined);
    socket.on('data', () => (held.answered = true));
    socket.write(
      `POST /fhir/Patient HTTP/1.1\r\nHost: fhir.test\r\nAuthorization: ${authorization}\r\n` +
        `Content-Type: ${FHIR_JSON}\r\nContent-Length: ${60 * KIB}\r\n\r\n${patientOf(60 * KIB).slice(0, KIB)}`,
    );
    return held;
  };

  /** A whole 60 KiB create, answered. */
  const create = async () => {
    const body = patientOf(60 * KIB);
    return partialRequest(
      base,
      { method: 'POST', path: '/fhir/Patient', headers: { Authorization: authorization, 'Content-Type': FHIR_JSON } },
      body.length,
      body,
    );
  };

  it('answers 503 with Retry-After past the bound, and reads bodies again once those in flight are done', async () => {
    let holders = [holder(), holder()];
    try {
      // The holders reach the server in their own time: probe until both are in (a holder that arrived
      // while a probe's 60 KiB were in flight was refused, and is replaced).
      const deadline = Date.now() + ANSWER_WITHIN_MS;
      let busy = await create();
      while (busy.status !== 503 && Date.now() < deadline) {
        holders = holders.map((h) => (h.answered ? (h.socket.destroy(), holder()) : h));
        busy = await create();
      }
      expect(busy.status).toBe(503);
      expect(Number(busy.headers['retry-after'])).toBeGreaterThan(0);
      expect(outcomeCode(busy)).toBe('server-busy');
      // Small bodies still fit beside the held ones.
      const small = JSON.stringify({ resourceType: 'Patient', active: true });
      const fits = await partialRequest(
        base,
        { method: 'POST', path: '/fhir/Patient', headers: { Authorization: authorization, 'Content-Type': FHIR_JSON } },
        small.length,
        small,
      );
      expect(fits.status).toBe(201);
    } finally {
      for (const { socket } of holders) socket.destroy();
    }
    // Their bytes are given back as their connections close.
    const deadline = Date.now() + ANSWER_WITHIN_MS;
    let created = await create();
    while (created.status !== 201 && Date.now() < deadline) created = await create();
    expect(created.status).toBe(201);
    expect(JSON.parse(created.body).name[0].family).toHaveLength(60 * KIB - 49);
  });

  it('refuses a maximum-size body with a bound below it as a configuration error', async () => {
    const { loadConfig } = await import('../src/config.js');
    expect(() =>
      loadConfig({ AMBIENT_MAX_BODY_BYTES: String(64 * KIB), AMBIENT_MAX_BODY_BYTES_IN_FLIGHT: String(32 * KIB) }),
    ).toThrow(/AMBIENT_MAX_BODY_BYTES_IN_FLIGHT/);
  });
});
