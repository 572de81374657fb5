// Issue 3 through HTTP, as a client sees it: the token endpoint, the bearer check, scopes, rate limits,
// lockouts, HTTPS rules, key rotation and the audit trail, on SQLite and PostgreSQL. Account changes are
// made through a second database connection, as the CLI in another process would make them.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  generateKeyPair,
  importJWK,
  jwtVerify,
  SignJWT,
} from 'jose';
import type { JWK, JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { BACKENDS, testDatabase } from './support/databases.js';
import { fhirClient, TOKEN_PATH } from './support/fhir-client.js';
import type { Reply } from './support/fhir-client.js';
import { FORM, freshLoopback, LogCapture, tokenRequest } from './support/token-requests.js';
import type { TestDatabase } from './support/databases.js';
import { AccountStore } from '../src/auth/accounts.js';
import type { Account, NewAccount } from '../src/auth/accounts.js';
import { addSigningKey } from '../src/auth/signing-keys.js';

const PUBLIC_URL = 'http://fhir.test:8080';
const WWW = 'Bearer error="invalid_token"';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
describe.each(BACKENDS)('auth on %s', (backend) => {
  let database: TestDatabase;
  let admin: SqlDatabase;
  let accounts: AccountStore;
  let app: FastifyInstance;
  const log = new LogCapture();
  const extraApps: FastifyInstance[] = [];
  const secrets: string[] = [];

  const makeApp = async (env: Record<string, string> = {}, logger = log.logger): Promise<FastifyInstance> => {
    const config = loadConfig({ DATABASE_URL: database.url, AMBIENT_PUBLIC_URL: PUBLIC_URL, ...env });
    const built = await assembleApp(config, logger);
    await built.ready();
    extraApps.push(built);
    return built;
  };

  const newAccount = async (options: Partial<NewAccount> = {}): Promise<{ account: Account; password: string }> => {
    const password = `pw-${randomUUID()}`;
    secrets.push(password);
    const account = await accounts.create({ username: `user-${randomUUID()}`, password, ...options });
    return { account, password };
  };

  const tokenFor = async (
    account: Account,
    password: string,
    target = app,
    extra: Record<string, string> = {},
  ): Promise<string> => {
    const res = await tokenRequest(target, { username: account.username, password, ...extra });
    expect(res.statusCode, res.body).toBe(200);
    const token = (res.json() as { access_token: string }).access_token;
    secrets.push(token);
    return token;
  };

  /** A read of an unknown Patient with this token: 404 once the bearer check lets it through. */
  const readPatient = (token: string, target: FastifyInstance = app) =>
    fhirClient(target, token).get(`/fhir/Patient/${randomUUID()}`);
  /** The same with this Authorization header as it is (none when undefined). */
  const readPatientWithHeader = (authorization: string | undefined) =>
    app.inject({
      method: 'GET',
      url: `/fhir/Patient/${randomUUID()}`,
      headers: authorization === undefined ? {} : { authorization },
    });

  const expectInvalidToken = (res: Reply, reason?: string) => {
    expect(res.statusCode, res.body).toBe(401);
    expect(res.headers['www-authenticate']).toBe(WWW);
    if (reason) expect(log.events('auth.refused').at(-1)).toMatchObject({ reason });
  };

  /** Signs a token with the server's own current key, for claims the token endpoint would never issue. */
  const signWithServerKey = async (claims: JWTPayload, header: Record<string, unknown> = {}): Promise<string> => {
    const [row] = await admin.query<{ kid: string; private_jwk: string }>(
      'SELECT kid, private_jwk FROM signing_key ORDER BY created_at DESC, kid DESC',
    );
    const key = await importJWK(JSON.parse(row.private_jwk) as JWK, 'ES256');
    return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: row.kid, typ: 'at+jwt', ...header }).sign(key);
  };

  beforeAll(async () => {
    database = await testDatabase(backend);
    app = await makeApp();
    admin = openDatabase(database.url);
    accounts = new AccountStore(admin);
  });

  afterAll(async () => {
    for (const a of extraApps) await a.close();
    await admin?.close();
    await database?.dispose();
  });

  describe('token endpoint', () => {
    it('issues an ES256 JWT with the claims of docs/api.md, verifiable with the JWKS', async () => {
      const { account, password } = await newAccount();
      const res = await tokenRequest(app, { username: account.username, password, grant_type: 'password' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      const body = res.json() as Record<string, unknown>;
      expect(body).toEqual({
        access_token: expect.any(String),
        token_type: 'bearer',
        expires_in: 172800,
        scope: 'system/*.cruds scribe.read scribe.write',
      });
      const token = body.access_token as string;
      secrets.push(token);
      const header = decodeProtectedHeader(token);
      expect(header).toMatchObject({ alg: 'ES256', typ: 'at+jwt', kid: expect.any(String) });
      const claims = decodeJwt(token);
      expect(claims).toMatchObject({ iss: PUBLIC_URL, sub: account.id, scope: body.scope, jti: expect.any(String) });
      expect(claims.exp! - claims.iat!).toBe(172800);
      expect(Math.abs(claims.iat! - Date.now() / 1000)).toBeLessThan(5);

      const jwks = await app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
      expect(jwks.statusCode).toBe(200);
      const keySet = jwks.json() as { keys: JWK[] };
      for (const key of keySet.keys) {
        expect(key).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig', kid: expect.any(String) });
        expect(key).not.toHaveProperty('d');
      }
      const verified = await jwtVerify(token, createLocalJWKSet(keySet), { issuer: PUBLIC_URL, algorithms: ['ES256'] });
      expect(verified.payload.sub).toBe(account.id);

      expect((await readPatient(token)).statusCode).toBe(404);
    });

    it('answers every credential failure with one 401 body', async () => {
      const good = await newAccount();
      const inactive = await newAccount({ active: false });
      const noApi = await newAccount({ apiAccess: false });
      const attempts = [
        { username: good.account.username, password: 'wrong-password' },
        { username: `nobody-${randomUUID()}`, password: 'whatever-password' },
        { username: inactive.account.username, password: inactive.password },
        { username: noApi.account.username, password: noApi.password },
      ];
      const bodies = new Set<string>();
      for (const attempt of attempts) {
        const res = await tokenRequest(app, attempt);
        expect(res.statusCode).toBe(401);
        expect(res.headers['www-authenticate']).toBeUndefined();
        expect(res.headers['cache-control']).toBe('no-store');
        bodies.add(res.body);
      }
      expect(bodies.size).toBe(1);
      expect(JSON.parse([...bodies][0])).toEqual({ error: 'invalid_grant', error_description: expect.any(String) });

      const failed = log.events('login.failed');
      const reasons = failed.map((e) => e.reason);
      expect(reasons).toEqual(expect.arrayContaining(['wrong-password', 'unknown-user', 'inactive', 'no-api-access']));
      const unknown = failed.find((e) => e.reason === 'unknown-user')!;
      expect(unknown.username).toBeUndefined();
      expect(unknown.username_hmac).toMatch(/^[0-9a-f]{16}$/);
      expect(unknown.client).toBe('127.0.0.1');
    });

    it('takes as long for an unknown username as for a wrong password', async () => {
      const { account } = await newAccount();
      const timeOnce = async (username: string) => {
        const started = performance.now();
        expect((await tokenRequest(app, { username, password: 'not-the-password' })).statusCode).toBe(401);
        return performance.now() - started;
      };
      // Interleaved, and the fastest of each kept: a burst of load on a shared machine then slows both
      // kinds alike instead of one block of five (the intrinsic cost is the least noisy minimum).
      const knownSamples: number[] = [];
      const unknownSamples: number[] = [];
      for (let i = 0; i < 5; i++) {
        knownSamples.push(await timeOnce(account.username));
        unknownSamples.push(await timeOnce(`ghost-${randomUUID()}`));
      }
      const known = Math.min(...knownSamples);
      const unknown = Math.min(...unknownSamples);
      // Both verify one argon2id hash (~10+ ms); without the dummy hash an unknown user would take ~1 ms.
      expect(unknown).toBeGreaterThan(known * 0.4);
      expect(known).toBeGreaterThan(unknown * 0.4);
    });

    it.each([
      ['a missing password', { username: 'someone' }],
      ['a missing username', { password: 'something' }],
      ['an empty username', { username: '', password: 'something' }],
    ])('refuses %s with 400 invalid_request', async (_name, fields) => {
      const res = await tokenRequest(app, fields);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'invalid_request', error_description: expect.any(String) });
    });

    it('refuses a body that is not form-encoded with 400 invalid_request', async () => {
      const { account, password } = await newAccount();
      for (const [contentType, payload] of [
        ['application/json', JSON.stringify({ username: account.username, password })],
        ['text/plain', `username=${account.username}&password=${password}`],
        ['multipart/form-data; boundary=x', '--x--'],
      ]) {
        const res = await app.inject({
          method: 'POST',
          url: TOKEN_PATH,
          headers: { 'content-type': contentType },
          payload,
        });
        expect(res.statusCode, contentType).toBe(400);
        expect(res.json()).toMatchObject({ error: 'invalid_request' });
      }
      const empty = await app.inject({ method: 'POST', url: TOKEN_PATH });
      expect(empty.statusCode).toBe(400);
      expect(empty.json()).toMatchObject({ error: 'invalid_request' });
    });

    it('refuses a repeated field and credentials in the URL', async () => {
      const repeated = await app.inject({
        method: 'POST',
        url: TOKEN_PATH,
        headers: FORM,
        payload: 'username=a&username=b&password=something',
      });
      expect(repeated.statusCode).toBe(400);
      expect(repeated.json()).toMatchObject({ error: 'invalid_request' });
      const inUrl = await tokenRequest(app, { username: 'a' }, { url: `${TOKEN_PATH}?password=secret-in-url` });
      expect(inUrl.statusCode).toBe(400);
      expect(inUrl.json()).toMatchObject({ error: 'invalid_request' });
    });

    it('answers other methods with 405', async () => {
      const res = await app.inject({ method: 'GET', url: TOKEN_PATH });
      expect(res.statusCode).toBe(405);
      expect(res.headers.allow).toBe('POST');
      expect(res.json()).toMatchObject({ error: 'invalid_request' });
    });

    it('refuses another grant type with 400 unsupported_grant_type', async () => {
      const { account, password } = await newAccount();
      // (client_credentials is SMART Backend Services now: see smart-backend.int.test.ts.)
      const res = await tokenRequest(app, { username: account.username, password, grant_type: 'authorization_code' });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'unsupported_grant_type', error_description: expect.any(String) });
    });

    it('narrows the scope on request, and refuses more than the account has with 400 invalid_scope', async () => {
      const { account, password } = await newAccount({ scopes: ['system/*.rs', 'system/Patient.cud', 'scribe.read'] });
      const narrowed = await tokenRequest(app, {
        username: account.username,
        password,
        scope: 'system/Patient.rs scribe.read',
      });
      expect(narrowed.statusCode).toBe(200);
      expect(narrowed.json()).toMatchObject({ scope: 'system/Patient.rs scribe.read' });
      const token = (narrowed.json() as { access_token: string }).access_token;
      expect(decodeJwt(token).scope).toBe('system/Patient.rs scribe.read');
      const create = await fhirClient(app, token).post('/fhir/Patient', { resourceType: 'Patient' });
      expect(create.statusCode).toBe(403);

      for (const scope of ['system/*.cruds', 'system/Observation.c', 'scribe.write']) {
        const res = await tokenRequest(app, { username: account.username, password, scope });
        expect(res.statusCode, scope).toBe(400);
        expect(res.json()).toEqual({ error: 'invalid_scope', error_description: expect.stringContaining(scope) });
      }
      const unknown = await tokenRequest(app, { username: account.username, password, scope: 'openid' });
      expect(unknown.statusCode).toBe(400);
      expect(unknown.json()).toMatchObject({ error: 'invalid_scope' });
    });

    it('locks a username out after N failures (429 + Retry-After), whatever the password, and logs it', async () => {
      const lockLog = new LogCapture();
      const locking = await makeApp(
        { AMBIENT_LOGIN_MAX_FAILURES_PER_USER: '3', AMBIENT_LOGIN_LOCKOUT_SECONDS: '900' },
        lockLog.logger,
      );
      const { account, password } = await newAccount();
      const other = await newAccount();
      const remoteAddress = freshLoopback();
      for (let i = 0; i < 3; i++) {
        expect(
          (await tokenRequest(locking, { username: account.username, password: 'wrong-one' }, { remoteAddress }))
            .statusCode,
        ).toBe(401);
      }
      const locked = await tokenRequest(locking, { username: account.username, password }, { remoteAddress });
      expect(locked.statusCode).toBe(429);
      expect(Number(locked.headers['retry-after'])).toBeGreaterThan(890);
      expect(Number(locked.headers['retry-after'])).toBeLessThanOrEqual(900);
      expect(locked.json()).toMatchObject({ error: 'slow_down' });
      // Another username from the same address is not affected; the account itself is not disabled.
      await tokenFor(other.account, other.password, locking);
      expect((await accounts.require(account.username)).active).toBe(true);
      expect(lockLog.events('login.lockout')).toEqual([
        expect.objectContaining({ locked_by: 'username', account_id: account.id, client: remoteAddress }),
      ]);
      expect(lockLog.events('login.locked')).toHaveLength(1);
    });

    it('an unknown username locks out the same way (lockouts reveal nothing)', async () => {
      const locking = await makeApp({ AMBIENT_LOGIN_MAX_FAILURES_PER_USER: '2' });
      const username = `ghost-${randomUUID()}`;
      const remoteAddress = freshLoopback();
      expect((await tokenRequest(locking, { username, password: 'x-password' }, { remoteAddress })).statusCode).toBe(
        401,
      );
      expect((await tokenRequest(locking, { username, password: 'x-password' }, { remoteAddress })).statusCode).toBe(
        401,
      );
      expect((await tokenRequest(locking, { username, password: 'x-password' }, { remoteAddress })).statusCode).toBe(
        429,
      );
    });

    it('a success resets the username count', async () => {
      const locking = await makeApp({ AMBIENT_LOGIN_MAX_FAILURES_PER_USER: '3' });
      const { account, password } = await newAccount();
      const remoteAddress = freshLoopback();
      const fail = () =>
        tokenRequest(locking, { username: account.username, password: 'wrong-one' }, { remoteAddress });
      expect((await fail()).statusCode).toBe(401);
      expect((await fail()).statusCode).toBe(401);
      expect(
        (await tokenRequest(locking, { username: account.username, password }, { remoteAddress })).statusCode,
      ).toBe(200);
      expect((await fail()).statusCode).toBe(401);
      expect((await fail()).statusCode).toBe(401);
      expect(
        (await tokenRequest(locking, { username: account.username, password }, { remoteAddress })).statusCode,
      ).toBe(200);
    });

    it('locks a client address out after N failures over any usernames', async () => {
      const lockLog = new LogCapture();
      const locking = await makeApp({ AMBIENT_LOGIN_MAX_FAILURES_PER_ADDRESS: '4' }, lockLog.logger);
      const { account, password } = await newAccount();
      const remoteAddress = freshLoopback();
      for (let i = 0; i < 4; i++) {
        const res = await tokenRequest(
          locking,
          { username: `spray-${i}-${randomUUID()}`, password: 'guess-1234' },
          { remoteAddress },
        );
        expect(res.statusCode).toBe(401);
      }
      const locked = await tokenRequest(locking, { username: account.username, password }, { remoteAddress });
      expect(locked.statusCode).toBe(429);
      expect(Number(locked.headers['retry-after'])).toBeGreaterThan(0);
      // The same account from another address still works.
      await tokenFor(account, password, locking);
      expect(lockLog.events('login.lockout')).toEqual([
        expect.objectContaining({ locked_by: 'address', client: remoteAddress }),
      ]);
    });

    it('refuses plain HTTP from a non-loopback address with 403, whatever X-Forwarded-Proto says', async () => {
      const { account, password } = await newAccount();
      for (const headers of [{}, { 'x-forwarded-proto': 'https' }]) {
        const res = await tokenRequest(
          app,
          { username: account.username, password },
          { remoteAddress: '10.1.2.3', headers },
        );
        expect(res.statusCode).toBe(403);
        expect(res.json()).toEqual({ error: 'invalid_request', error_description: expect.stringContaining('HTTPS') });
      }
      for (const remoteAddress of ['::1', '::ffff:127.0.0.1', '127.9.9.9']) {
        expect((await tokenRequest(app, { username: account.username, password }, { remoteAddress })).statusCode).toBe(
          200,
        );
      }
      expect(log.events('login.https_required').length).toBeGreaterThanOrEqual(2);
    });

    it('behind a trusted proxy, follows X-Forwarded-Proto and X-Forwarded-For', async () => {
      const proxied = await makeApp({ AMBIENT_TRUST_PROXY: 'loopback, 10.0.0.0/8' });
      const { account, password } = await newAccount();
      const viaHttps = await tokenRequest(
        proxied,
        { username: account.username, password },
        { remoteAddress: '10.0.0.2', headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': '203.0.113.7' } },
      );
      expect(viaHttps.statusCode).toBe(200);
      expect(viaHttps.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains');
      const viaHttp = await tokenRequest(
        proxied,
        { username: account.username, password },
        { remoteAddress: '127.0.0.1', headers: { 'x-forwarded-proto': 'http', 'x-forwarded-for': '203.0.113.7' } },
      );
      expect(viaHttp.statusCode).toBe(403);
      expect(viaHttp.headers['strict-transport-security']).toBeUndefined();
    });
  });

  describe('bearer check', () => {
    let token: string;
    let account: Account;

    beforeAll(async () => {
      const created = await newAccount();
      account = created.account;
      token = await tokenFor(account, created.password);
    });

    it('accepts exactly "Bearer <token>"', async () => {
      expect((await readPatient(token)).statusCode).toBe(404);
    });

    it.each([
      ['missing', undefined, 'missing'],
      ['empty', '', 'missing'],
      ['without the Bearer prefix', '{token}', 'not-bearer'],
      ['another scheme', 'Basic {token}', 'not-bearer'],
      ['a lower-case scheme', 'bearer {token}', 'not-bearer'],
      ['Bearer alone', 'Bearer', 'not-bearer'],
      ['Bearer and a space', 'Bearer ', 'not-bearer'],
      ['two spaces', 'Bearer  {token}', 'not-bearer'],
      ['a tab', 'Bearer\t{token}', 'not-bearer'],
      ['no space', 'Bearer{token}', 'not-bearer'],
      ['extra characters after', 'Bearer {token} extra', 'not-bearer'],
      ['a trailing dot', 'Bearer {token}.', 'not-bearer'],
      ['a quote', 'Bearer "{token}"', 'not-bearer'],
      ['two tokens', 'Bearer {token},Bearer {token}', 'not-bearer'],
      ['malformed JWT', 'Bearer abc.def.ghi', 'malformed'],
      ['not a JWT', 'Bearer not-a-jwt', 'not-bearer'],
    ])('refuses a header %s with 401 invalid_token', async (_name, header, reason) => {
      const res = await readPatientWithHeader(header?.replaceAll('{token}', token));
      expectInvalidToken(res, reason);
      expect(res.json()).toMatchObject({ resourceType: 'OperationOutcome' });
    });

    it('refuses a token with a wrong signature', async () => {
      const [h, p, s] = token.split('.');
      const middle = Math.floor(s.length / 2);
      const flipped = s.slice(0, middle) + (s[middle] === 'A' ? 'B' : 'A') + s.slice(middle + 1);
      expectInvalidToken(await readPatient(`${h}.${p}.${flipped}`), 'bad-signature');
      // A payload changed under the original signature.
      const claims = { ...decodeJwt(token), scope: 'system/*.cruds system/*.*' };
      const forged = `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${s}`;
      expectInvalidToken(await readPatient(forged), 'bad-signature');
    });

    it('refuses alg none, HS256 with the public key, and other algorithms', async () => {
      const { kid } = decodeProtectedHeader(token);
      const claims = decodeJwt(token);
      const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
      const none = `${b64({ alg: 'none', typ: 'at+jwt', kid })}.${b64(claims)}.`;
      expectInvalidToken(await readPatient(none), 'not-bearer');
      expectInvalidToken(await readPatient(`${none}AAAA`), 'bad-algorithm');

      const jwks = (await app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json() as { keys: JWK[] };
      const publicJwk = jwks.keys.find((k) => k.kid === kid)!;
      const hs = await new SignJWT(claims)
        .setProtectedHeader({ alg: 'HS256', kid, typ: 'at+jwt' })
        .sign(new TextEncoder().encode(JSON.stringify(publicJwk)));
      expectInvalidToken(await readPatient(hs), 'bad-algorithm');

      const { privateKey } = await generateKeyPair('ES384');
      const es384 = await new SignJWT(claims).setProtectedHeader({ alg: 'ES384', kid, typ: 'at+jwt' }).sign(privateKey);
      expectInvalidToken(await readPatient(es384), 'bad-algorithm');
    });

    it('refuses a token signed by a key it does not know (unknown kid, or a known kid with another key)', async () => {
      const claims = decodeJwt(token);
      const { privateKey } = await generateKeyPair('ES256');
      const unknownKid = await new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: 'not-a-key-of-ours', typ: 'at+jwt' })
        .sign(privateKey);
      expectInvalidToken(await readPatient(unknownKid), 'unknown-kid');
      const noKid = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt' }).sign(privateKey);
      expectInvalidToken(await readPatient(noKid), 'unknown-kid');
      const stolenKid = await new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: decodeProtectedHeader(token).kid, typ: 'at+jwt' })
        .sign(privateKey);
      expectInvalidToken(await readPatient(stolenKid), 'bad-signature');
    });

    it('refuses tokens with bad claims even when signed by the server key', async () => {
      const now = Math.floor(Date.now() / 1000);
      const base = {
        sub: account.id,
        iat: now,
        exp: now + 3600,
        jti: randomUUID(),
        scope: 'system/*.cruds',
        iss: PUBLIC_URL,
        aud: `${PUBLIC_URL}/fhir`,
      };
      // Sanity check: the crafted token is accepted when its claims are right.
      expect((await readPatient(await signWithServerKey(base))).statusCode).toBe(404);
      const bad: [string, JWTPayload, Record<string, unknown>?][] = [
        ['bad-claims', { ...base, iss: 'https://evil.example' }],
        ['bad-claims', { ...base, jti: undefined }],
        ['bad-claims', { ...base, scope: undefined }],
        ['bad-claims', { ...base, exp: undefined }],
        ['expired', { ...base, iat: now - 100, exp: now - 1 }],
        ['expired', { ...base, iat: now - 100, exp: now }],
        ['account-deleted', { ...base, sub: randomUUID() }],
        ['bad-claims', base, { typ: 'JWT' }],
      ];
      for (const [reason, claims, header] of bad) {
        const crafted = await signWithServerKey(JSON.parse(JSON.stringify(claims)) as JWTPayload, header);
        expectInvalidToken(await readPatient(crafted), reason);
      }
    });

    it('expires tokens exactly at exp (short TTL), even once cached', async () => {
      const shortLived = await makeApp({ AMBIENT_TOKEN_TTL_SECONDS: '2' });
      const { account: a, password } = await newAccount();
      const res = await tokenRequest(shortLived, { username: a.username, password });
      expect(res.json()).toMatchObject({ expires_in: 2 });
      const short = (res.json() as { access_token: string }).access_token;
      const { iat, exp } = decodeJwt(short);
      expect(exp! - iat!).toBe(2);
      expect((await readPatient(short, shortLived)).statusCode).toBe(404);
      await sleep(exp! * 1000 - Date.now() + 20);
      const expired = await readPatient(short, shortLived);
      expectInvalidToken(expired, 'expired');
      expect(expired.json()).toMatchObject({
        issue: [expect.objectContaining({ diagnostics: expect.stringMatching(/expired/) })],
      });
      // The token endpoint gives a new one.
      const again = await tokenFor(a, password, shortLived);
      expect((await readPatient(again, shortLived)).statusCode).toBe(404);
    });

    it('refuses, from the very next request, a token whose account was made inactive, for good', async () => {
      const { account: a, password } = await newAccount();
      const t = await tokenFor(a, password);
      expect((await readPatient(t)).statusCode).toBe(404);
      await accounts.update(a.username, { active: false });
      expectInvalidToken(await readPatient(t), 'account-inactive');
      await accounts.update(a.username, { active: true });
      expectInvalidToken(await readPatient(t), 'revoked');
      expect((await readPatient(await tokenFor(a, password))).statusCode).toBe(404);
    });

    it('refuses a token whose account lost API access', async () => {
      const { account: a, password } = await newAccount();
      const t = await tokenFor(a, password);
      expect((await readPatient(t)).statusCode).toBe(404);
      await accounts.update(a.username, { apiAccess: false });
      expectInvalidToken(await readPatient(t), 'no-api-access');
    });

    it('refuses a token whose account was deleted', async () => {
      const { account: a, password } = await newAccount();
      const t = await tokenFor(a, password);
      expect((await readPatient(t)).statusCode).toBe(404);
      await accounts.delete(a.username);
      expectInvalidToken(await readPatient(t), 'account-deleted');
    });

    it('refuses every token issued before a revocation, and accepts one issued right after', async () => {
      const { account: a, password } = await newAccount();
      const first = await tokenFor(a, password);
      const second = await tokenFor(a, password);
      expect((await readPatient(first)).statusCode).toBe(404);
      await accounts.revokeTokens(a.username);
      expectInvalidToken(await readPatient(first), 'revoked');
      expectInvalidToken(await readPatient(second), 'revoked');
      const fresh = await tokenFor(a, password);
      expect((await readPatient(fresh)).statusCode).toBe(404);
      expect(log.events('auth.refused').some((e) => e.reason === 'revoked' && e.account_id === a.id)).toBe(true);
    });

    it('sees changes made by another app process on the same database', async () => {
      const other = await makeApp();
      const { account: a, password } = await newAccount();
      const t = await tokenFor(a, password, other);
      expect((await readPatient(t)).statusCode).toBe(404);
      expect((await readPatient(t, other)).statusCode).toBe(404);
      await accounts.update(a.username, { active: false });
      expectInvalidToken(await readPatient(t));
      expectInvalidToken(await readPatient(t, other));
    });

    it('keeps tokens of a rotated key valid and signs new ones with the new key', async () => {
      const { account: a, password } = await newAccount();
      const before = await tokenFor(a, password);
      const rotated = await addSigningKey(admin);
      const after = await tokenFor(a, password);
      expect(decodeProtectedHeader(after).kid).toBe(rotated.kid);
      expect(decodeProtectedHeader(before).kid).not.toBe(rotated.kid);
      expect((await readPatient(before)).statusCode).toBe(404);
      expect((await readPatient(after)).statusCode).toBe(404);
      const jwks = (await app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json() as { keys: JWK[] };
      const kids = jwks.keys.map((k) => k.kid);
      expect(kids).toContain(rotated.kid);
      expect(kids).toContain(decodeProtectedHeader(before).kid);
    });

    it('verifies a token signed by a key another process created after this one loaded its keys', async () => {
      const other = await makeApp();
      const { account: a, password } = await newAccount();
      const rotated = await addSigningKey(admin);
      const fromOther = await tokenFor(a, password, other);
      expect(decodeProtectedHeader(fromOther).kid).toBe(rotated.kid);
      expect((await readPatient(fromOther)).statusCode).toBe(404);
    });
  });

  describe('scopes', () => {
    it('403 when the scopes do not cover the interaction (system/Patient.rs creating)', async () => {
      const { account: a, password } = await newAccount({ scopes: ['system/Patient.rs'] });
      const t = await tokenFor(a, password);
      expect((await readPatient(t)).statusCode).toBe(404);
      const create = await fhirClient(app, t).post('/fhir/Patient', { resourceType: 'Patient' });
      expect(create.statusCode).toBe(403);
      expect(create.json()).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'forbidden' }] });
      const observation = await fhirClient(app, t).get(`/fhir/Observation/${randomUUID()}`);
      expect(observation.statusCode).toBe(403);
      expect(log.events('auth.forbidden').some((e) => e.account_id === a.id && e.method === 'POST')).toBe(true);
    });

    it('v1 and v2 wildcard scopes create', async () => {
      for (const scopes of [['system/*.cruds'], ['system/*.write'], ['system/*.*'], ['system/Patient.c']]) {
        const { account: a, password } = await newAccount({ scopes });
        const t = await tokenFor(a, password);
        const create = await fhirClient(app, t).post('/fhir/Patient', { resourceType: 'Patient' });
        expect(create.statusCode, scopes.join(' ')).toBe(201);
      }
    });

    it('a token never grants more than its account has now', async () => {
      const { account: a, password } = await newAccount({ scopes: ['system/*.cruds'] });
      const t = await tokenFor(a, password);
      await accounts.update(a.username, { scopes: ['system/Patient.r'] });
      expect((await readPatient(t)).statusCode).toBe(404);
      const create = await fhirClient(app, t).post('/fhir/Patient', { resourceType: 'Patient' });
      expect(create.statusCode).toBe(403);
    });
  });

  describe('rate limits', () => {
    it('429 with Retry-After past the limit, RateLimit-* on every authenticated response', async () => {
      const { account: a, password } = await newAccount({ rateLimit: 3 });
      const t = await tokenFor(a, password);
      for (const remaining of [2, 1, 0]) {
        const res = await readPatient(t);
        expect(res.statusCode).toBe(404);
        expect(res.headers['ratelimit-limit']).toBe('3');
        expect(res.headers['ratelimit-remaining']).toBe(String(remaining));
        expect(Number(res.headers['ratelimit-reset'])).toBeGreaterThan(0);
        expect(Number(res.headers['ratelimit-reset'])).toBeLessThanOrEqual(60);
      }
      const limited = await readPatient(t);
      expect(limited.statusCode).toBe(429);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect(limited.headers['ratelimit-remaining']).toBe('0');
      expect(limited.json()).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'throttled' }] });
      // Token requests do not count, and another account is not slowed.
      await tokenFor(a, password);
      const other = await newAccount({ rateLimit: 3 });
      expect((await readPatient(await tokenFor(other.account, other.password))).statusCode).toBe(404);
    });

    it('refused (401) requests do not count', async () => {
      const { account: a, password } = await newAccount({ rateLimit: 2 });
      const t = await tokenFor(a, password);
      await accounts.update(a.username, { active: false });
      for (let i = 0; i < 5; i++) expectInvalidToken(await readPatient(t));
      await accounts.update(a.username, { active: true });
      // Deactivation ended the old token; the new one counts against the same (untouched) limit.
      expectInvalidToken(await readPatient(t));
      const fresh = await tokenFor(a, password);
      expect((await readPatient(fresh)).statusCode).toBe(404);
      expect((await readPatient(fresh)).statusCode).toBe(404);
      expect((await readPatient(fresh)).statusCode).toBe(429);
    });

    it('no limit means no RateLimit headers and no 429', async () => {
      const { account: a, password } = await newAccount();
      const t = await tokenFor(a, password);
      for (let i = 0; i < 10; i++) {
        const res = await readPatient(t);
        expect(res.statusCode).toBe(404);
        expect(res.headers['ratelimit-limit']).toBeUndefined();
      }
    });
  });

  describe('headers and audit', () => {
    it('sends nosniff on every response and no HSTS over plain HTTP', async () => {
      for (const url of ['/healthz', '/fhir/metadata', '/no/such/path', '/fhir/Patient/x', '/.well-known/jwks.json']) {
        const res = await app.inject({ method: 'GET', url });
        expect(res.headers['x-content-type-options'], url).toBe('nosniff');
        expect(res.headers['strict-transport-security'], url).toBeUndefined();
      }
    });

    it('logs one access line per authenticated request, naming the account', async () => {
      const { account: a, password } = await newAccount();
      const t = await tokenFor(a, password);
      const id = randomUUID();
      await fhirClient(app, t).get(`/fhir/Patient/${id}?_pretty=true`);
      const lines = log.events('access').filter((e) => e.account_id === a.id);
      expect(lines).toEqual([
        expect.objectContaining({
          audit: true,
          username: a.username,
          method: 'GET',
          path: `/fhir/Patient/${id}`,
          resource_type: 'Patient',
          ids: [id],
          status: 404,
          client: '127.0.0.1',
        }),
      ]);
      const issued = log.events('token.issued').filter((e) => e.account_id === a.id);
      expect(issued).toEqual([
        expect.objectContaining({ outcome: 'success', client: '127.0.0.1', jti: expect.any(String) }),
      ]);
    });

    it('never logs a password or a token', () => {
      const all = log.lines.join('\n');
      expect(secrets.length).toBeGreaterThan(20);
      for (const secret of secrets) expect(all).not.toContain(secret);
    });
  });
});
