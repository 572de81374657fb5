// TLS_CERT_FILE + TLS_KEY_FILE: the server speaks HTTPS, the token endpoint works over it from any
// address, and responses carry HSTS. The certificate is a self-signed one made with openssl for the test.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assembleApp } from '../src/assemble.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/storage/open-database.js';
import type { SqlDatabase } from '../src/storage/sql/database.js';
import { sqliteTestDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { bearer } from './support/fhir-client.js';
import { AccountStore } from '../src/auth/accounts.js';

interface HttpsResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

describe('HTTPS', () => {
  let dir: string;
  let database: TestDatabase;
  let admin: SqlDatabase;
  let app: FastifyInstance;
  let ca: Buffer;
  let port: number;

  const call = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
    new Promise<HttpsResponse>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method, headers, ca, servername: 'localhost' }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      });
      req.on('error', reject);
      req.end(body);
    });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ambient-fhir-tls-'));
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ],
      { stdio: 'ignore' },
    );
    ca = readFileSync(cert);
    database = sqliteTestDatabase();
    app = await assembleApp(
      loadConfig({
        DATABASE_URL: database.url,
        TLS_CERT_FILE: cert,
        TLS_KEY_FILE: key,
        AMBIENT_PUBLIC_URL: 'https://fhir.example.org',
      }),
    );
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as AddressInfo).port;
    admin = openDatabase(database.url);
  });

  afterAll(async () => {
    await app?.close();
    await admin?.close();
    await database?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('issues tokens over HTTPS, with HSTS and no-store, and the token works', async () => {
    const username = `tls-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await new AccountStore(admin).create({ username, password });
    const res = await call(
      'POST',
      '/v1/ambient/api/auth/token',
      { 'content-type': 'application/x-www-form-urlencoded' },
      new URLSearchParams({ username, password }).toString(),
    );
    expect(res.status).toBe(200);
    expect(res.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    const token = (JSON.parse(res.body) as { access_token: string; token_type: string }).access_token;
    const read = await call('GET', `/fhir/Patient/${randomUUID()}`, bearer(token));
    expect(read.status).toBe(404);
    expect(read.headers['strict-transport-security']).toBeDefined();
  });

  it('sends HSTS on every HTTPS response', async () => {
    for (const path of ['/healthz', '/fhir/metadata', '/nowhere']) {
      const res = await call('GET', path);
      expect(res.headers['strict-transport-security'], path).toBe('max-age=31536000; includeSubDomains');
    }
  });

  it('the JWT issuer is the public address', async () => {
    const username = `tls-${randomUUID()}`;
    const password = `pw-${randomUUID()}`;
    await new AccountStore(admin).create({ username, password });
    const res = await call(
      'POST',
      '/v1/ambient/api/auth/token',
      { 'content-type': 'application/x-www-form-urlencoded' },
      new URLSearchParams({ username, password }).toString(),
    );
    const token = (JSON.parse(res.body) as { access_token: string }).access_token;
    const claims = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()) as { iss: string };
    expect(claims.iss).toBe('https://fhir.example.org');
  });
});
