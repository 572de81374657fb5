// Issue 10 (an attacker's review), through HTTP on SQLite and PostgreSQL: the lockout counts attempts
// before the password is checked and cannot be turned against an account from one address; tokens end
// with password changes, deactivation and retired keys and carry `aud`; only named proxies are believed;
// the token endpoint refuses and never logs credentials in its URL; a Bundle costs one point per entry.
import { createHash, randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { decodeJwt, decodeProtectedHeader, importJWK, SignJWT } from 'jose';
import type { JWK, JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { BACKENDS, testDatabase } from './support/databases.js';
import { fhirClient, passwordToken, TOKEN_PATH } from './support/fhir-client.js';
import type { Reply } from './support/fhir-client.js';
import { freshLoopback, LogCapture, tokenRequest } from './support/token-requests.js';
import type { TestDatabase } from './support/databases.js';
import { AccountStore } from '../src/auth/accounts.js';
import type { Account, NewAccount } from '../src/auth/accounts.js';
import { addSigningKey, retireSigningKey } from '../src/auth/signing-keys.js';

const PUBLIC_URL = 'http://fhir.test:8080';

describe.each(BACKENDS)('lockouts, token ends, proxies and Bundle costs against an attacker on %s', (backend) => {
  let database: TestDatabase;
  let admin: SqlDatabase;
  let accounts: AccountStore;
  let app: FastifyInstance;
  const log = new LogCapture('trace');
  const apps: FastifyInstance[] = [];

  const makeApp = async (env: Record<string, string> = {}, logger = log.logger): Promise<FastifyInstance> => {
    const config = loadConfig({ DATABASE_URL: database.url, AMBIENT_PUBLIC_URL: PUBLIC_URL, ...env });
    const built = await assembleApp(config, logger);
    await built.ready();
    apps.push(built);
    return built;
  };

  const newAccount = async (options: Partial<NewAccount> = {}): Promise<{ account: Account; password: string }> => {
    const password = `pw-${randomUUID()}`;
    const account = await accounts.create({ username: `user-${randomUUID()}`, password, ...options });
    return { account, password };
  };

  const tokenFor = (account: Account, password: string, target = app): Promise<string> =>
    passwordToken(target, account.username, password);

  const readPatient = (token: string, target = app) => fhirClient(target, token).get(`/fhir/Patient/${randomUUID()}`);

  const expectRefused = (res: Reply, reason: string) => {
    expect(res.statusCode, res.body).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect(log.events('auth.refused').at(-1)).toMatchObject({ reason });
  };

  /** Signs a token with the server's current key: claims the token endpoint would never issue. */
  const signWithServerKey = async (claims: JWTPayload): Promise<string> => {
    const [row] = await admin.query<{ kid: string; private_jwk: string }>(
      'SELECT kid, private_jwk FROM signing_key WHERE retired_at IS NULL ORDER BY created_at DESC, kid DESC',
    );
    const key = await importJWK(JSON.parse(row.private_jwk) as JWK, 'ES256');
    return new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: row.kid, typ: 'at+jwt' }).sign(key);
  };

  beforeAll(async () => {
    database = await testDatabase(backend);
    app = await makeApp();
    admin = openDatabase(database.url);
    accounts = new AccountStore(admin);
  });

  afterAll(async () => {
    for (const a of apps) await a.close();
    await admin?.close();
    await database?.dispose();
  });

  describe('the lockout counts attempts before the password is checked', () => {
    it('a burst of simultaneous wrong passwords gets at most the threshold of 401s; a right one in it gets 429', async () => {
      const { account, password } = await newAccount();
      const remoteAddress = freshLoopback();
      const attempts = Array.from({ length: 120 }, (_, i) =>
        tokenRequest(
          app,
          { username: account.username, password: i === 119 ? password : `wrong-${i}` },
          { remoteAddress },
        ),
      );
      const answers = await Promise.all(attempts);
      const wrong = answers.slice(0, 119).map((r) => r.statusCode);
      expect(wrong.filter((s) => s === 401).length).toBeLessThanOrEqual(10);
      expect(wrong.filter((s) => s === 429).length).toBeGreaterThanOrEqual(109);
      expect(answers[119].statusCode).toBe(429);
      expect(Number(answers[119].headers['retry-after'])).toBeGreaterThan(0);
    });
  });

  describe('a lockout is no switch for attackers', () => {
    it('failures from one address lock only (username, that address)', async () => {
      const { account, password } = await newAccount();
      const attacker = freshLoopback();
      for (let i = 0; i < 10; i++) {
        expect(
          (await tokenRequest(app, { username: account.username, password: 'wrong-one' }, { remoteAddress: attacker }))
            .statusCode,
        ).toBe(401);
      }
      const locked = await tokenRequest(app, { username: account.username, password }, { remoteAddress: attacker });
      expect(locked.statusCode).toBe(429);
      expect(locked.headers['cache-control']).toBe('no-store');
      expect(locked.headers.pragma).toBe('no-cache');
      // The account's own client, from another address, still logs in.
      expect(
        (await tokenRequest(app, { username: account.username, password }, { remoteAddress: freshLoopback() }))
          .statusCode,
      ).toBe(200);
    });

    it('a per-username limit over every address throttles a distributed attack, but not an address the account logged in from', async () => {
      const distributed = await makeApp({
        AMBIENT_LOGIN_MAX_FAILURES_PER_USER_ADDRESS: '2',
        AMBIENT_LOGIN_MAX_FAILURES_PER_USER: '5',
      });
      const { account, password } = await newAccount();
      const known = freshLoopback();
      expect(
        (await tokenRequest(distributed, { username: account.username, password }, { remoteAddress: known }))
          .statusCode,
      ).toBe(200);
      for (const count of [2, 2, 1]) {
        const remoteAddress = freshLoopback();
        for (let i = 0; i < count; i++) {
          const res = await tokenRequest(
            distributed,
            { username: account.username, password: 'guess-it' },
            { remoteAddress },
          );
          expect(res.statusCode).toBe(401);
        }
      }
      const stranger = await tokenRequest(
        distributed,
        { username: account.username, password },
        { remoteAddress: freshLoopback() },
      );
      expect(stranger.statusCode).toBe(429);
      expect(Number(stranger.headers['retry-after'])).toBeGreaterThan(0);
      expect(
        (await tokenRequest(distributed, { username: account.username, password }, { remoteAddress: known }))
          .statusCode,
      ).toBe(200);
    });

    it('account unlock clears the lockout, and the running server honours it on its next request', async () => {
      const { account, password } = await newAccount();
      const remoteAddress = freshLoopback();
      for (let i = 0; i < 10; i++)
        await tokenRequest(app, { username: account.username, password: 'wrong-one' }, { remoteAddress });
      expect((await tokenRequest(app, { username: account.username, password }, { remoteAddress })).statusCode).toBe(
        429,
      );
      await accounts.unlock(account.username);
      expect((await tokenRequest(app, { username: account.username, password }, { remoteAddress })).statusCode).toBe(
        200,
      );
      await expect(accounts.unlock(`nobody-${randomUUID()}`)).rejects.toThrow(/No account named/);
    });
  });

  describe('tokens end when they should', () => {
    let account: Account;
    let password: string;
    let token: string;

    beforeAll(async () => {
      ({ account, password } = await newAccount());
      token = await tokenFor(account, password);
    });

    it('carries aud (the FHIR base) and refuses a token without it or with another', async () => {
      expect(decodeJwt(token).aud).toBe(`${PUBLIC_URL}/fhir`);
      expect((await readPatient(token)).statusCode).toBe(404);
      const now = Math.floor(Date.now() / 1000);
      const base = {
        sub: account.id,
        iat: now,
        exp: now + 3600,
        jti: randomUUID(),
        scope: 'system/*.cruds',
        iss: PUBLIC_URL,
      };
      expect((await readPatient(await signWithServerKey({ ...base, aud: `${PUBLIC_URL}/fhir` }))).statusCode).toBe(404);
      expectRefused(await readPatient(await signWithServerKey(base)), 'bad-claims');
      expectRefused(
        await readPatient(await signWithServerKey({ ...base, aud: 'https://elsewhere.example/fhir' })),
        'bad-claims',
      );
    });

    it('refuses a token whose iat lies ahead, through revoke-tokens and key rotations alike', async () => {
      const iat = Math.floor(Date.now() / 1000) + 10 * 365 * 86400;
      const claims = {
        sub: account.id,
        iat,
        exp: iat + 172800,
        jti: randomUUID(),
        scope: 'system/*.cruds',
        iss: PUBLIC_URL,
        aud: `${PUBLIC_URL}/fhir`,
      };
      expectRefused(await readPatient(await signWithServerKey(claims)), 'bad-claims');
    });

    it('refuses a token whose lifetime exceeds AMBIENT_TOKEN_TTL_SECONDS', async () => {
      const now = Math.floor(Date.now() / 1000);
      const claims = {
        sub: account.id,
        iat: now,
        exp: now + 172801,
        jti: randomUUID(),
        scope: 'system/*.cruds',
        iss: PUBLIC_URL,
        aud: `${PUBLIC_URL}/fhir`,
      };
      expectRefused(await readPatient(await signWithServerKey(claims)), 'bad-claims');
    });

    it('a password change ends the account tokens', async () => {
      const { account: a, password: pw } = await newAccount();
      const old = await tokenFor(a, pw);
      expect((await readPatient(old)).statusCode).toBe(404);
      await accounts.update(a.username, { password: 'a-brand-new-password' });
      expectRefused(await readPatient(old), 'revoked');
      expect((await readPatient(await tokenFor(a, 'a-brand-new-password'))).statusCode).toBe(404);
    });

    it('deactivation (and loss of API access) ends tokens for good: reactivation does not revive them', async () => {
      for (const [off, on] of [
        [{ active: false }, { active: true }],
        [{ apiAccess: false }, { apiAccess: true }],
      ]) {
        const { account: a, password: pw } = await newAccount();
        const old = await tokenFor(a, pw);
        expect((await readPatient(old)).statusCode).toBe(404);
        await accounts.update(a.username, off);
        expect((await readPatient(old)).statusCode).toBe(401);
        await accounts.update(a.username, on);
        expectRefused(await readPatient(old), 'revoked');
        expect((await readPatient(await tokenFor(a, pw))).statusCode).toBe(404);
      }
    });

    it('keys retire: a retired key tokens are refused from the next request on, in every process; the signing key cannot be retired', async () => {
      const other = await makeApp();
      const { account: a, password: pw } = await newAccount();
      const old = await tokenFor(a, pw);
      const oldKid = decodeProtectedHeader(old).kid!;
      expect((await readPatient(old)).statusCode).toBe(404);
      expect((await readPatient(old, other)).statusCode).toBe(404);
      const rotated = await addSigningKey(admin);
      await expect(retireSigningKey(admin, rotated.kid)).rejects.toThrow(/current signing key.*keys rotate/);
      await retireSigningKey(admin, oldKid);
      expectRefused(await readPatient(old), 'unknown-kid');
      expectRefused(await readPatient(old, other), 'unknown-kid');
      const jwks = (await app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json() as { keys: JWK[] };
      expect(jwks.keys.map((k) => k.kid)).not.toContain(oldKid);
      const fresh = await tokenFor(a, pw, other);
      expect(decodeProtectedHeader(fresh).kid).toBe(rotated.kid);
      expect((await readPatient(fresh)).statusCode).toBe(404);
      await expect(retireSigningKey(admin, 'no-such-kid')).rejects.toThrow(/No signing key/);
    });
  });

  describe('only named proxies are believed', () => {
    let proxied: FastifyInstance;
    const proxyLog = new LogCapture();

    beforeAll(async () => {
      proxied = await makeApp(
        { AMBIENT_TRUST_PROXY: '10.0.0.0/8, 192.0.2.1', AMBIENT_LOGIN_MAX_FAILURES_PER_ADDRESS: '2' },
        proxyLog.logger,
      );
    });

    it('ignores X-Forwarded-For and X-Forwarded-Proto from a peer that is not a trusted proxy', async () => {
      const { account, password } = await newAccount();
      for (const proto of ['https', 'http']) {
        const res = await tokenRequest(
          proxied,
          { username: account.username, password },
          { remoteAddress: '198.51.100.20', headers: { 'x-forwarded-for': '127.0.0.1', 'x-forwarded-proto': proto } },
        );
        expect(res.statusCode, proto).toBe(403);
      }
      expect(proxyLog.events('login.https_required').at(-1)).toMatchObject({ client: '198.51.100.20' });
    });

    it('through trusted proxies, the client is the right-most address they do not vouch for', async () => {
      const { account, password } = await newAccount();
      const res = await tokenRequest(
        proxied,
        { username: account.username, password },
        {
          remoteAddress: '10.0.0.2',
          headers: {
            'x-forwarded-for': '203.0.113.66, 198.51.100.77, 192.0.2.1, 10.0.0.9',
            'x-forwarded-proto': 'https',
          },
        },
      );
      expect(res.statusCode).toBe(200);
      expect(proxyLog.events('token.issued').at(-1)).toMatchObject({ account_id: account.id, client: '198.51.100.77' });
      // The per-address limit counts that address, whatever the client writes to the left of it.
      const fail = (xff: string) =>
        tokenRequest(
          proxied,
          { username: `spray-${randomUUID()}`, password: 'guess-it' },
          { remoteAddress: '10.0.0.2', headers: { 'x-forwarded-for': xff, 'x-forwarded-proto': 'https' } },
        );
      expect((await fail('203.0.113.1, 198.51.100.88')).statusCode).toBe(401);
      expect((await fail('203.0.113.2, 198.51.100.88')).statusCode).toBe(401);
      expect((await fail('203.0.113.3, 198.51.100.88')).statusCode).toBe(429);
      expect((await fail('198.51.100.99')).statusCode).toBe(401);
      // An IPv6 client is counted by its /64: it holds all of it.
      expect((await fail('2001:db8:1:2::1')).statusCode).toBe(401);
      expect((await fail('2001:db8:1:2:ffff:ffff:ffff:ffff')).statusCode).toBe(401);
      expect((await fail('2001:db8:1:2:abcd::9')).statusCode).toBe(429);
      expect((await fail('2001:db8:1:3::1')).statusCode).toBe(401);
    });
  });

  describe('the token endpoint leaks nothing', () => {
    it.each(['username', 'password', 'client_secret', 'client_assertion'])(
      'refuses %s in the query string with 400 invalid_request, and never logs the query',
      async (name) => {
        const { account, password } = await newAccount();
        const secret = `secret-${randomUUID()}`;
        const res = await tokenRequest(
          app,
          { username: account.username, password },
          { url: `${TOKEN_PATH}?${name}=${secret}` },
        );
        expect(res.statusCode).toBe(400);
        expect(res.json()).toMatchObject({ error: 'invalid_request' });
        expect(res.headers['cache-control']).toBe('no-store');
        expect(res.headers.pragma).toBe('no-cache');
        expect(log.lines.join('\n')).not.toContain(secret);
      },
    );

    it('logs an unknown username as a keyed hash that every process on the database agrees on', async () => {
      const other = await makeApp();
      const username = `typed-a-password-${randomUUID()}`;
      await tokenRequest(app, { username, password: 'whatever-it-is' }, { remoteAddress: freshLoopback() });
      await tokenRequest(other, { username, password: 'whatever-it-is' }, { remoteAddress: freshLoopback() });
      const failed = log
        .events('login.failed')
        .filter((e) => e.reason === 'unknown-user')
        .slice(-2);
      expect(failed).toHaveLength(2);
      const plainHash = createHash('sha256').update(username).digest('hex');
      for (const line of failed) {
        expect(line.username_sha256).toBeUndefined();
        expect(line.username_hmac).toMatch(/^[0-9a-f]{16}$/);
        expect(plainHash.startsWith(line.username_hmac as string)).toBe(false);
      }
      expect(failed[0].username_hmac).toBe(failed[1].username_hmac);
      expect(log.lines.join('\n')).not.toContain(username);
    });

    it('sends Cache-Control: no-store and Pragma: no-cache on token responses and every error', async () => {
      const { account, password } = await newAccount();
      const answers = [
        await tokenRequest(app, { username: account.username, password }),
        await tokenRequest(app, { username: account.username, password: 'wrong-one' }),
        await tokenRequest(app, { username: account.username }),
        await tokenRequest(app, { username: account.username, password }, { remoteAddress: '198.51.100.5' }),
      ];
      const secret = `secret-${randomUUID()}`;
      answers.push(await app.inject({ method: 'GET', url: `${TOKEN_PATH}?password=${secret}` }));
      expect(answers.map((r) => r.statusCode)).toEqual([200, 401, 400, 403, 405]);
      for (const res of answers) {
        expect(res.headers['cache-control'], String(res.statusCode)).toBe('no-store');
        expect(res.headers.pragma, String(res.statusCode)).toBe('no-cache');
      }
      expect(log.lines.join('\n')).not.toContain(secret);
    });
  });

  describe('a Bundle costs one point per entry', () => {
    const bundle = (type: 'batch' | 'transaction', family: string, entries: number) => ({
      resourceType: 'Bundle',
      type,
      entry: Array.from({ length: entries }, () => ({
        resource: { resourceType: 'Patient', name: [{ family }] },
        request: { method: 'POST', url: 'Patient' },
      })),
    });
    const post = (token: string, body: unknown) => fhirClient(app, token).post('/fhir', body);

    it('counts each entry against the account rate limit; without the points, 429 and nothing runs', async () => {
      const { account, password } = await newAccount({ rateLimit: 5 });
      const limited = await tokenFor(account, password);
      const { account: reader, password: readerPw } = await newAccount();
      const unlimited = await tokenFor(reader, readerPw);
      const count = async (family: string) =>
        (
          (await fhirClient(app, unlimited).get(`/fhir/Patient?family=${family}&_total=accurate`)).json() as {
            total: number;
          }
        ).total;

      const first = `fam${randomUUID().replaceAll('-', '')}`;
      const ok = await post(limited, bundle('batch', first, 3));
      expect(ok.statusCode, ok.body).toBe(200);
      expect(ok.headers['ratelimit-remaining']).toBe('2');
      expect(await count(first)).toBe(3);

      for (const type of ['batch', 'transaction'] as const) {
        const family = `fam${randomUUID().replaceAll('-', '')}`;
        const refused = await post(limited, bundle(type, family, 3));
        expect(refused.statusCode, refused.body).toBe(429);
        expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
        expect(await count(family)).toBe(0);
      }
    });
  });
});
