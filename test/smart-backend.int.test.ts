// SMART Backend Services (issue 12 §1) over HTTP, on SQLite and PostgreSQL: discovery, keys registered
// with `account create|update --jwks-file`, the client_credentials grant with a client assertion signed by
// keys generated here, and each refusal a client assertion can meet.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { decodeJwt, exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { CryptoKey, JWK } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { fhirClient, TOKEN_PATH } from './support/fhir-client.js';
import type { Reply } from './support/fhir-client.js';
import { freshLoopback, tokenRequest } from './support/token-requests.js';
import { startTestApp, TEST_PUBLIC_URL } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { assembleApp } from '../src/assemble.js';
import { createAccountCommand } from '../src/cli/account.js';
import { CLIENT_ASSERTION_TYPE } from '../src/auth/client-assertion.js';

const TOKEN_URL = `${TEST_PUBLIC_URL}${TOKEN_PATH}`;

interface KeyPair {
  readonly kid: string;
  readonly alg: 'ES384' | 'RS384';
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
  readonly privateJwk: JWK;
}

async function keyPair(alg: 'ES384' | 'RS384'): Promise<KeyPair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = `${alg.toLowerCase()}-${randomUUID()}`;
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg };
  return { kid, alg, privateKey, publicJwk, privateJwk };
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** A client assertion as SMART describes it; `claims` and `header` override the defaults. */
async function assertion(
  clientId: string,
  key: KeyPair,
  claims: Record<string, unknown> = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT({
    iss: clientId,
    sub: clientId,
    aud: TOKEN_URL,
    jti: randomUUID(),
    exp: nowSeconds() + 240,
    ...claims,
  })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...header } as { alg: string })
    .sign(key.privateKey);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe.each(BACKENDS)('SMART Backend Services on %s', (backend) => {
  let t: TestApp;
  let dir: string;
  let es: KeyPair;
  let rs: KeyPair;
  const logLines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) });

  const cli = async (args: string[], stdin = '') => {
    let stdout = '';
    let stderr = '';
    const io = {
      stdin: Readable.from(stdin === '' ? [] : [stdin]),
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
      env: { DATABASE_URL: t.database.url },
    };
    const code = await createAccountCommand(io).run(args);
    return { code, stdout, stderr };
  };

  const jwksFile = (keys: unknown[]): string => {
    const path = join(dir, `${randomUUID()}.json`);
    writeFileSync(path, JSON.stringify({ keys }));
    return path;
  };

  /** A fresh account with the ES384 and RS384 public keys registered (through the account store). */
  const client = async (scopes = 'system/*.cruds', options: { active?: boolean; apiAccess?: boolean } = {}) => {
    const username = `svc-${randomUUID()}`;
    await t.accounts.create({
      username,
      password: `pw-${randomUUID()}`,
      scopes: scopes.split(' '),
      jwks: JSON.stringify({ keys: [es.publicJwk, rs.publicJwk] }),
      ...options,
    });
    return username;
  };

  const grant = (fields: Record<string, string>, remoteAddress = freshLoopback(), target: FastifyInstance = t.app) =>
    tokenRequest(target, fields, { remoteAddress });

  const clientCredentials = (
    clientAssertion: string,
    scope = 'system/*.rs',
    remoteAddress?: string,
    target?: FastifyInstance,
  ) =>
    grant(
      {
        grant_type: 'client_credentials',
        client_assertion_type: CLIENT_ASSERTION_TYPE,
        client_assertion: clientAssertion,
        scope,
      },
      remoteAddress,
      target,
    );

  /** 401 invalid_client, and the audit trail's reason for it (when given) is this one. */
  const expectInvalidClient = (res: Reply, reason?: string) => {
    expect(res.statusCode, res.body).toBe(401);
    expect(res.json()).toEqual({ error: 'invalid_client', error_description: expect.any(String) });
    if (reason === undefined) return;
    const failed = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.event === 'login.failed' && l.grant_type === 'client_credentials');
    expect(failed.at(-1)?.reason).toBe(reason);
  };

  beforeAll(async () => {
    t = await startTestApp(backend, { LOG_LEVEL: 'info' }, { logger });
    dir = mkdtempSync(join(tmpdir(), 'ambient-smart-'));
    [es, rs] = await Promise.all([keyPair('ES384'), keyPair('RS384')]);
  });

  afterAll(async () => {
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('discovery answers without auth at /.well-known and under /fhir, naming only what works', async () => {
    for (const url of ['/.well-known/smart-configuration', '/fhir/.well-known/smart-configuration']) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.json()).toEqual({
        token_endpoint: TOKEN_URL,
        token_endpoint_auth_methods_supported: ['private_key_jwt'],
        token_endpoint_auth_signing_alg_values_supported: ['RS384', 'ES384'],
        grant_types_supported: ['client_credentials', 'password'],
        scopes_supported: expect.arrayContaining(['system/*.cruds', 'system/*.rs', 'scribe.read']),
        capabilities: ['client-confidential-asymmetric'],
      });
    }
  });

  it('the CapabilityStatement names the token endpoint (SMART oauth-uris) and the SMART-on-FHIR service', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/fhir/metadata' });
    expect(res.statusCode).toBe(200);
    const security = res.json().rest[0].security;
    expect(security.extension).toEqual([
      {
        url: 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
        extension: [{ url: 'token', valueUri: TOKEN_URL }],
      },
    ]);
    expect(security.service[0].coding[0]).toEqual({
      system: 'http://terminology.hl7.org/CodeSystem/restful-security-service',
      code: 'SMART-on-FHIR',
    });
  });

  it('full flow: keys registered with the CLI, ES384 and RS384 assertions get short tokens that work on /fhir', async () => {
    const username = `svc-${randomUUID()}`;
    const created = await cli([
      'create',
      username,
      '--jwks-file',
      jwksFile([es.publicJwk, rs.publicJwk]),
      '--scopes',
      'system/Patient.cruds system/Observation.rs',
    ]);
    expect(created.code, created.stderr).toBe(0);
    const shown = await cli(['show', username]);
    expect(shown.code, shown.stderr).toBe(0);
    const account = JSON.parse(shown.stdout);
    expect(account.client_keys).toEqual([
      { kid: es.kid, alg: 'ES384' },
      { kid: rs.kid, alg: 'RS384' },
    ]);
    // Never key material: no coordinates, no modulus, no private parts.
    expect(shown.stdout).not.toMatch(/"(x|y|n|e|d)"\s*:/);

    const patient = await (
      await t.client()
    ).create({ resourceType: 'Patient', name: [{ family: `Smart-${randomUUID()}` }] });
    expect(patient.statusCode).toBe(201);
    const patientId = patient.json().id;

    for (const key of [es, rs]) {
      const before = nowSeconds();
      const res = await clientCredentials(await assertion(username, key), 'system/Patient.rs');
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      const body = res.json();
      expect(body).toEqual({
        access_token: expect.any(String),
        token_type: 'bearer',
        expires_in: expect.any(Number),
        scope: 'system/Patient.rs',
      });
      expect(body.expires_in).toBeGreaterThan(0);
      expect(body.expires_in).toBeLessThanOrEqual(300);
      const claims = decodeJwt(body.access_token);
      expect(claims).toMatchObject({ sub: account.id, aud: `${TEST_PUBLIC_URL}/fhir`, scope: 'system/Patient.rs' });
      expect(claims.exp! - claims.iat!).toBeLessThanOrEqual(300);
      expect(claims.iat!).toBeGreaterThanOrEqual(before);

      const fhir = fhirClient(t.app, body.access_token);
      const read = await fhir.get(`/fhir/Patient/${patientId}`);
      expect(read.statusCode, read.body).toBe(200);
      const search = await fhir.get('/fhir/Patient?_count=1');
      expect(search.statusCode).toBe(200);
      // Narrowed to what was asked: no create, no Observation.
      const write = await fhir.create({ resourceType: 'Patient' });
      expect(write.statusCode).toBe(403);
      const other = await fhir.get('/fhir/Observation');
      expect(other.statusCode).toBe(403);
    }
  });

  it('an assertion without a kid header is tried against each registered key of its algorithm', async () => {
    const username = await client();
    const res = await clientCredentials(await assertion(username, rs, {}, { kid: undefined }));
    expect(res.statusCode, res.body).toBe(200);
  });

  it('tokens of the grant follow the ordinary revocation rules', async () => {
    const username = await client();
    const res = await clientCredentials(await assertion(username, es));
    expect(res.statusCode).toBe(200);
    const fhir = fhirClient(t.app, res.json().access_token);
    expect((await fhir.get('/fhir/Patient')).statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await t.accounts.revokeTokens(username);
    expect((await fhir.get('/fhir/Patient')).statusCode).toBe(401);
  });

  it('refuses an assertion for the wrong audience', async () => {
    const username = await client();
    expectInvalidClient(
      await clientCredentials(await assertion(username, es, { aud: `${TEST_PUBLIC_URL}/fhir` })),
      'wrong-audience',
    );
  });

  it('refuses an exp more than five minutes ahead, and one already past', async () => {
    const username = await client();
    expectInvalidClient(
      await clientCredentials(await assertion(username, es, { exp: nowSeconds() + 600 })),
      'exp-too-far',
    );
    expectInvalidClient(await clientCredentials(await assertion(username, es, { exp: nowSeconds() - 5 })), 'expired');
    expectInvalidClient(await clientCredentials(await assertion(username, es, { exp: undefined })), 'bad-claims');
  });

  it('refuses a replayed jti, in every server process on the database', async () => {
    const username = await client();
    const once = await assertion(username, es);
    expect((await clientCredentials(once)).statusCode).toBe(200);
    expectInvalidClient(await clientCredentials(once), 'replayed-jti');
    // A second server on the same database refuses it as well (the jti is in the database, not in memory).
    const second = await assembleApp(t.config);
    await second.ready();
    try {
      const elsewhere = await assertion(username, rs);
      expect((await clientCredentials(elsewhere)).statusCode).toBe(200);
      const replayed = await clientCredentials(elsewhere, 'system/*.rs', undefined, second);
      expectInvalidClient(replayed);
    } finally {
      await second.close();
    }
  });

  it('refuses an unknown kid, and a key that was never registered', async () => {
    const username = await client();
    expectInvalidClient(
      await clientCredentials(await assertion(username, es, {}, { kid: 'no-such-kid' })),
      'unknown-key',
    );
    const stranger = await keyPair('ES384');
    // Signed by an unregistered key that claims a registered kid, or no kid at all.
    expectInvalidClient(
      await clientCredentials(await assertion(username, { ...stranger, kid: es.kid })),
      'bad-signature',
    );
    expectInvalidClient(
      await clientCredentials(await assertion(username, stranger, {}, { kid: undefined })),
      'bad-signature',
    );
  });

  it('refuses iss ≠ sub, an unknown client and an account without keys', async () => {
    const username = await client();
    const other = await client();
    expectInvalidClient(await clientCredentials(await assertion(username, es, { sub: other })), 'wrong-issuer');
    expectInvalidClient(await clientCredentials(await assertion(`nobody-${randomUUID()}`, es)), 'unknown-user');
    const password = `pw-${randomUUID()}`;
    const keyless = `plain-${randomUUID()}`;
    await t.accounts.create({ username: keyless, password });
    expectInvalidClient(await clientCredentials(await assertion(keyless, es)), 'no-client-keys');
  });

  it('refuses alg none and HS256', async () => {
    const username = await client();
    const claims = { iss: username, sub: username, aud: TOKEN_URL, jti: randomUUID(), exp: nowSeconds() + 60 };
    expectInvalidClient(
      await clientCredentials(`${b64({ alg: 'none', kid: es.kid })}.${b64(claims)}.`),
      'bad-algorithm',
    );
    const hs = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', kid: es.kid })
      .sign(new TextEncoder().encode('a shared secret of thirty-two bytes!!'));
    expectInvalidClient(await clientCredentials(hs), 'bad-algorithm');
    expectInvalidClient(await clientCredentials('not-a-jwt'), 'malformed');
  });

  it('refuses inactive accounts and accounts without API access with invalid_client', async () => {
    const inactive = await client('system/*.cruds', { active: false });
    expectInvalidClient(await clientCredentials(await assertion(inactive, es)), 'inactive');
    const noApi = await client('system/*.cruds', { apiAccess: false });
    expectInvalidClient(await clientCredentials(await assertion(noApi, es)), 'no-api-access');
  });

  it('scope: required, known and within the account’s (invalid_request, invalid_scope)', async () => {
    const username = await client('system/Patient.rs');
    const beyond = await clientCredentials(await assertion(username, es), 'system/Patient.rs system/*.cruds');
    expect(beyond.statusCode).toBe(400);
    expect(beyond.json().error).toBe('invalid_scope');
    const unknown = await clientCredentials(await assertion(username, es), 'system/Nonsense.zz');
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error).toBe('invalid_scope');
    const missing = await grant({
      grant_type: 'client_credentials',
      client_assertion_type: CLIENT_ASSERTION_TYPE,
      client_assertion: await assertion(username, es),
    });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error).toBe('invalid_request');
  });

  it('missing fields are invalid_request; other grants unsupported_grant_type; the password grant still works', async () => {
    const username = await client();
    const noAssertion = await grant({
      grant_type: 'client_credentials',
      client_assertion_type: CLIENT_ASSERTION_TYPE,
      scope: 'system/*.rs',
    });
    expect(noAssertion.statusCode).toBe(400);
    expect(noAssertion.json().error).toBe('invalid_request');
    const noType = await grant({
      grant_type: 'client_credentials',
      client_assertion: await assertion(username, es),
      scope: 'system/*.rs',
    });
    expect(noType.statusCode).toBe(400);
    expect(noType.json().error).toBe('invalid_request');
    const other = await grant({ grant_type: 'authorization_code', code: 'x' });
    expect(other.statusCode).toBe(400);
    expect(other.json().error).toBe('unsupported_grant_type');
    expect(typeof (await t.token('system/*.rs'))).toBe('string');
  });

  it('failed assertions count against the login lockout, like failed passwords', async () => {
    const locking = await startTestApp(backend, { AMBIENT_LOGIN_MAX_FAILURES_PER_USER_ADDRESS: '3' });
    try {
      const username = `svc-${randomUUID()}`;
      await locking.accounts.create({
        username,
        password: `pw-${randomUUID()}`,
        jwks: JSON.stringify({ keys: [es.publicJwk] }),
      });
      const remoteAddress = freshLoopback();
      const send = (clientAssertion: string) =>
        clientCredentials(clientAssertion, 'system/*.rs', remoteAddress, locking.app);
      for (let i = 0; i < 3; i++) {
        expect((await send(await assertion(username, es, { aud: 'https://elsewhere.example' }))).statusCode).toBe(401);
      }
      const locked = await send(await assertion(username, es));
      expect(locked.statusCode).toBe(429);
      expect(locked.headers['retry-after']).toBeDefined();
    } finally {
      await locking.close();
    }
  });

  describe('account --jwks-file', () => {
    const refused = async (args: string[], message: RegExp) => {
      const res = await cli(args);
      expect(res.code, res.stdout).toBe(1);
      expect(res.stderr).toMatch(message);
      expect(res.stdout).toBe('');
    };

    it('refuses private keys, other algorithms and malformed files, with a clear message', async () => {
      const name = () => `svc-${randomUUID()}`;
      await refused(['create', name(), '--jwks-file', jwksFile([es.privateJwk])], /private or secret key/);
      await refused(['create', name(), '--jwks-file', jwksFile([rs.privateJwk])], /private or secret key/);
      await refused(
        ['create', name(), '--jwks-file', jwksFile([{ kty: 'oct', k: 'c2VjcmV0', kid: 'h', alg: 'HS256' }])],
        /private or secret key/,
      );
      const p256 = await generateKeyPair('ES256', { extractable: true });
      await refused(
        ['create', name(), '--jwks-file', jwksFile([{ ...(await exportJWK(p256.publicKey)), kid: 'p256' }])],
        /P-384/,
      );
      await refused(['create', name(), '--jwks-file', jwksFile([{ ...rs.publicJwk, alg: 'RS256' }])], /RS384/);
      await refused(['create', name(), '--jwks-file', jwksFile([{ ...es.publicJwk, kid: undefined }])], /kid/);
      await refused(['create', name(), '--jwks-file', jwksFile([])], /no key/);
      const notJson = join(dir, 'not-json.json');
      writeFileSync(notJson, '{"keys": [');
      await refused(['create', name(), '--jwks-file', notJson], /not valid JSON/);
      await refused(['create', name(), '--jwks-file', join(dir, 'missing.json')], /Cannot read the JWKS file/);
    });

    it('update replaces the registered keys; the old ones stop working', async () => {
      const username = `svc-${randomUUID()}`;
      expect((await cli(['create', username, '--jwks-file', jwksFile([es.publicJwk])])).code).toBe(0);
      expect((await clientCredentials(await assertion(username, es))).statusCode).toBe(200);
      const updated = await cli(['update', username, '--jwks-file', jwksFile([rs.publicJwk])]);
      expect(updated.code, updated.stderr).toBe(0);
      expect(JSON.parse(updated.stdout).client_keys).toEqual([{ kid: rs.kid, alg: 'RS384' }]);
      expectInvalidClient(await clientCredentials(await assertion(username, es)), 'unknown-key');
      expect((await clientCredentials(await assertion(username, rs))).statusCode).toBe(200);
      await refused(['update', username, '--jwks-file', jwksFile([es.privateJwk])], /private or secret key/);
    });
  });
});
