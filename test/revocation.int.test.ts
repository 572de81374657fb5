// Revocation is exact to the token (issue 23, item 7), through HTTP on SQLite and PostgreSQL with the
// clock held still: every token issued before a revocation is refused, however many revocations share its
// second, and re-activating the account brings none of them back; a token issued after the revocation works.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { importJWK, SignJWT } from 'jose';
import type { JWK } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { BACKENDS } from './support/databases.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { Account } from '../src/auth/accounts.js';

/** A quarter past a whole second: every step of a test happens inside this one second. */
const FROZEN_AT = Date.UTC(2031, 0, 1, 12, 0, 0, 250);

describe.each(BACKENDS)('revocation exact to the token on %s', (backend) => {
  let t: TestApp;
  let app: FastifyInstance;

  beforeAll(async () => {
    t = await startTestApp(backend);
    app = t.app;
  });
  afterAll(async () => t?.close());
  afterEach(() => vi.useRealTimers());

  /** Holds Date still (timers run as usual): the server, the token endpoint and the CLI store share it. */
  const freezeClock = (at = FROZEN_AT) => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(at);
  };

  const newAccount = async (): Promise<{ account: Account; password: string }> => {
    const password = `pw-${randomUUID()}`;
    const account = await t.accounts.create({ username: `user-${randomUUID()}`, password, scopes: ['system/*.cruds'] });
    return { account, password };
  };

  const tokenFor = async (account: Account, password: string): Promise<string> => {
    return passwordToken(app, account.username, password);
  };

  const readPatient = (token: string) => fhirClient(app, token).get(`/fhir/Patient/${randomUUID()}`);

  /** Accepted: the token works (the Patient simply does not exist). */
  const expectWorks = async (token: string, what: string) => {
    const res = await readPatient(token);
    expect(res.statusCode, `${what}: ${res.body}`).toBe(404);
  };

  const expectRevoked = async (token: string, what: string) => {
    const res = await readPatient(token);
    expect(res.statusCode, `${what}: ${res.body}`).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
  };

  it('a second revocation in the same second refuses the token issued between the two', async () => {
    freezeClock();
    const { account, password } = await newAccount();
    const before = await tokenFor(account, password);
    await t.accounts.revokeTokens(account.username);
    await expectRevoked(before, 'issued before the first revocation');
    const between = await tokenFor(account, password);
    await expectWorks(between, 'issued after the first revocation');
    await t.accounts.revokeTokens(account.username);
    await expectRevoked(between, 'issued before the second revocation, in the same second');
    const after = await tokenFor(account, password);
    await expectWorks(after, 'issued after the second revocation, in the same second');
    // Still refused as the clock moves on, into the next seconds and well past them.
    for (const later of [1_000, 2_000, 60_000]) {
      vi.setSystemTime(FROZEN_AT + later);
      await expectRevoked(between, `${later} ms later`);
      await expectWorks(after, `the later token, ${later} ms later`);
    }
  });

  it('re-activation after a deactivation in the same second brings no earlier token back', async () => {
    freezeClock();
    for (const [off, on] of [
      [{ active: false }, { active: true }],
      [{ apiAccess: false }, { apiAccess: true }],
      [{ password: `new-${randomUUID()}` }, undefined],
    ] as const) {
      const { account, password } = await newAccount();
      await t.accounts.revokeTokens(account.username);
      const token = await tokenFor(account, password);
      await expectWorks(token, 'issued after a revocation');
      await t.accounts.update(account.username, off);
      if (on) await t.accounts.update(account.username, on);
      await expectRevoked(token, `after ${JSON.stringify(off)} and back, all in one second`);
      if (on) await expectWorks(await tokenFor(account, password), 'a token issued after re-activation');
    }
  });

  it('a token issued while its account is revoked concurrently is either refused or issued after the revocation', async () => {
    freezeClock();
    const { account, password } = await newAccount();
    const [token] = await Promise.all([tokenFor(account, password), t.accounts.revokeTokens(account.username)]);
    const first = (await readPatient(token)).statusCode;
    expect([401, 404]).toContain(first);
    // Whichever it was, one more revocation in the same second refuses it.
    await t.accounts.revokeTokens(account.username);
    await expectRevoked(token, 'after a later revocation in the same second');
  });

  it('a token from before token generations (no generation claim) is judged by its iat, and ended by any revocation', async () => {
    /** A token as the server issued them before generations: signed with its key, no generation claim. */
    const legacyToken = async (account: Account, iat: number) => {
      const admin = openDatabase(t.database.url);
      try {
        const [row] = await admin.query<{ kid: string; private_jwk: string }>(
          'SELECT kid, private_jwk FROM signing_key WHERE retired_at IS NULL ORDER BY created_at DESC, kid DESC',
        );
        const key = await importJWK(JSON.parse(row.private_jwk) as JWK, 'ES256');
        return await new SignJWT({ scope: 'system/*.cruds' })
          .setProtectedHeader({ alg: 'ES256', kid: row.kid, typ: 'at+jwt' })
          .setIssuer(t.config.publicUrl)
          .setAudience(`${t.config.publicUrl}/fhir`)
          .setSubject(account.id)
          .setIssuedAt(iat)
          .setExpirationTime(iat + 3600)
          .setJti(randomUUID())
          .sign(key);
      } finally {
        await admin.close();
      }
    };
    const now = Math.floor(Date.now() / 1000);
    const { account } = await newAccount();
    const legacy = await legacyToken(account, now - 10);
    await expectWorks(legacy, 'a legacy token of a never-revoked account');
    await t.accounts.revokeTokens(account.username);
    await expectRevoked(legacy, 'a legacy token after a revocation');
    await expectRevoked(await legacyToken(account, now + 1), 'a legacy token dated after the revocation');
  });
});
