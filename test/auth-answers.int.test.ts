// Refusals that say what to do (docs/api.md "Tokens"): a token issued elsewhere names the issuer and
// audience expected; a client assertion signed by the account's own key names the claim that failed,
// while every refusal before the signature is verified stays one answer; the HTTPS refusal names the
// three ways forward.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { CLIENT_ASSERTION_TYPE } from '../src/auth/client-assertion.js';
import { loadConfig } from '../src/config.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { fhirClient } from './support/fhir-client.js';

const TOKEN_PATH = '/v1/ambient/api/auth/token';
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

describe('answers that say what to do', () => {
  let t: TestApp;
  let other: TestApp;
  let samePlaceElsewhere: FastifyInstance;
  beforeAll(async () => {
    t = await startTestApp('postgres');
    other = await startTestApp('sqlite', { AMBIENT_PUBLIC_URL: 'http://other.test:9090' });
    // The same database (and so the same signing keys) served under another public URL.
    samePlaceElsewhere = await assembleApp(
      loadConfig({ DATABASE_URL: t.database.url, AMBIENT_PUBLIC_URL: 'http://moved.test:8080', LOG_LEVEL: 'silent' }),
    );
    await samePlaceElsewhere.ready();
  });
  afterAll(async () => {
    await samePlaceElsewhere?.close();
    await other?.close();
    await t?.close();
  });

  it('a token another server issued: 401 naming the issuer and audience this server expects', async () => {
    const foreign = await other.token();
    const res = await fhirClient(t.app, foreign).get('/fhir/Patient');
    expect(res.statusCode).toBe(401);
    const text = res.json().issue[0].diagnostics as string;
    expect(text).toContain('"http://other.test:9090'); // the issuer it names
    expect(text).toContain(JSON.stringify(`${TEST_PUBLIC_URL}/fhir`)); // the audience expected here
    expect(text).toContain('AMBIENT_PUBLIC_URL');
  });

  it('a token of this database issued under another public URL: 401 naming both', async () => {
    const token = await t.token();
    const res = await fhirClient(samePlaceElsewhere, token).get('/fhir/Patient');
    expect(res.statusCode).toBe(401);
    const text = res.json().issue[0].diagnostics as string;
    expect(text).toContain(TEST_PUBLIC_URL);
    expect(text).toContain('http://moved.test:8080');
  });

  it('a client assertion: the failed claim told once the signature is good, never before', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES384', { extractable: true });
    const kid = `k-${randomUUID()}`;
    const username = `svc-${randomUUID()}`;
    await t.accounts.create({
      username,
      password: `pw-${randomUUID()}`,
      scopes: ['system/*.rs'],
      jwks: JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES384', use: 'sig' }] }),
    });
    const signed = (claims: Record<string, unknown>, iss = username) =>
      new SignJWT({ iss, sub: iss, aud: `${TEST_PUBLIC_URL}${TOKEN_PATH}`, jti: randomUUID(), ...claims })
        .setProtectedHeader({ alg: 'ES384', kid })
        .setExpirationTime('2m')
        .sign(privateKey);
    let address = 0;
    const request = async (clientAssertion: string) =>
      t.app.inject({
        method: 'POST',
        url: TOKEN_PATH,
        headers: FORM,
        remoteAddress: `127.0.3.${++address}`,
        payload: new URLSearchParams({
          grant_type: 'client_credentials',
          client_assertion_type: CLIENT_ASSERTION_TYPE,
          client_assertion: clientAssertion,
          scope: 'system/*.rs',
        }).toString(),
      });
    const wrongAudience = await request(await signed({ aud: 'https://elsewhere.example/token' }));
    expect(wrongAudience.statusCode).toBe(401);
    expect(wrongAudience.json()).toEqual({
      error: 'invalid_client',
      error_description: `The client assertion was refused: its aud must be this server's token endpoint, ${TEST_PUBLIC_URL}${TOKEN_PATH}`,
    });
    const reused = await signed({ jti: 'once' });
    expect((await request(reused)).statusCode).toBe(200);
    expect((await request(reused)).json().error_description).toMatch(/its jti was used before/);
    // Before the signature is verified, one answer: an unknown account and a key it does not hold alike.
    const unknown = await request(await signed({}, `nobody-${randomUUID()}`));
    const { privateKey: strangerKey } = await generateKeyPair('ES384');
    const forged = await new SignJWT({
      iss: username,
      sub: username,
      aud: `${TEST_PUBLIC_URL}${TOKEN_PATH}`,
      jti: randomUUID(),
    })
      .setProtectedHeader({ alg: 'ES384', kid })
      .setExpirationTime('2m')
      .sign(strangerKey);
    const badSignature = await request(forged);
    expect(unknown.statusCode).toBe(401);
    expect(badSignature.json()).toEqual(unknown.json());
  });

  it('the HTTPS refusal names the three ways forward', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: TOKEN_PATH,
      headers: FORM,
      remoteAddress: '10.9.8.7',
      payload: new URLSearchParams({ username: 'someone', password: 'x' }).toString(),
    });
    expect(res.statusCode).toBe(403);
    const text = res.json().error_description as string;
    for (const way of ['TLS_CERT_FILE', 'loopback', 'AMBIENT_TRUST_PROXY']) expect(text).toContain(way);
  });
});
