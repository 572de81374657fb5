// How the server serves the web console (docs/console.md), over HTTP as a browser asks: `/` redirects,
// the page needs no token but the API behind it still does, the page's Content-Security-Policy and
// cache lifetimes, and nothing outside the built files: traversal and unknown assets are 404s.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { brotliDecompressSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR } from '../src/http/console.js';
import { BACKENDS } from './support/databases.js';
import { startTestApp } from './support/test-app.js';
import type { TestApp } from './support/test-app.js';

const assetNames = () => readdirSync(join(CONSOLE_DIR, 'assets'));
const scriptName = () => assetNames().find((name) => name.endsWith('.js'))!;
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

describe('the console build', () => {
  it('writes hashed assets, named by a page without inline script or style, under 300 KB gzipped', () => {
    const page = readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8');
    const names = assetNames();
    expect(names.filter((n) => n.endsWith('.js'))).toHaveLength(1);
    expect(names.filter((n) => n.endsWith('.css'))).toHaveLength(1);
    for (const name of names) {
      expect(name).toMatch(/^[\w-]+-[\w-]{8}\.(js|css)$/);
      expect(page).toContain(`"/console/assets/${name}"`);
    }
    expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page).not.toMatch(/<style|\sstyle=|\son[a-z]+=/);
    expect(page).not.toMatch(/(src|href)="(https?:)?\/\//);
    const gzipped = ['index.html', ...names.map((n) => `assets/${n}`)]
      .map((file) => gzipSync(readFileSync(join(CONSOLE_DIR, file)), { level: 9 }).length)
      .reduce((a, b) => a + b, 0);
    console.log(`[console] ${(gzipped / 1024).toFixed(1)} KB gzipped`);
    expect(gzipped).toBeLessThan(300 * 1024);
  });
});

describe.each(BACKENDS)('the console served on %s', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('redirects / to /console', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/' });
    expect(response.statusCode).toBe(302);
    expect(response.headers.location).toBe('/console');
  });

  it('answers the page without a token, with its CSP, no-cache and an ETag that revalidates', async () => {
    const response = await t.app.inject({ method: 'GET', url: '/console' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(response.body).toBe(readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8'));
    expect(response.headers['content-security-policy']).toBe(CSP);
    expect(response.headers['cache-control']).toBe('no-cache');
    expect(response.headers['x-content-type-options']).toBe('nosniff');
    expect(response.headers['x-frame-options']).toBe('DENY');
    expect(response.headers['referrer-policy']).toBe('no-referrer');
    const etag = String(response.headers.etag);
    const again = await t.app.inject({ method: 'GET', url: '/console', headers: { 'if-none-match': etag } });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    const other = await t.app.inject({ method: 'GET', url: '/console', headers: { 'if-none-match': '"other"' } });
    expect(other.statusCode).toBe(200);
  });

  it('answers the page for its client-side routes, with or without a trailing slash or a query', async () => {
    const page = readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8');
    for (const url of [
      '/console/',
      '/console/resources',
      '/console/resources?type=Patient&q=name%3Dchalm',
      '/console/resources/Patient/example-1.a',
      '/console/scribe',
      '/console/exports/',
    ]) {
      const response = await t.app.inject({ method: 'GET', url });
      expect([url, response.statusCode, response.headers['content-security-policy']]).toEqual([url, 200, CSP]);
      expect(response.body).toBe(page);
    }
  });

  it('serves the hashed assets for a year, immutable, compressed when asked', async () => {
    const name = scriptName();
    const response = await t.app.inject({
      method: 'GET',
      url: `/console/assets/${name}`,
      headers: { 'accept-encoding': 'br' },
    });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(response.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(response.headers['content-encoding']).toBe('br');
    expect(brotliDecompressSync(response.rawPayload).equals(readFileSync(join(CONSOLE_DIR, 'assets', name)))).toBe(
      true,
    );
    const css = assetNames().find((n) => n.endsWith('.css'))!;
    const style = await t.app.inject({ method: 'GET', url: `/console/assets/${css}` });
    expect(style.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(style.body).toBe(readFileSync(join(CONSOLE_DIR, 'assets', css), 'utf8'));
    const head = await t.app.inject({ method: 'HEAD', url: `/console/assets/${name}` });
    expect(head.statusCode).toBe(200);
  });

  it('answers 404 to unknown assets, other paths and every form of traversal', async () => {
    for (const url of [
      '/console/assets/nothing.js',
      `/console/assets/${scriptName()}x`,
      '/console/assets/',
      '/console/assets/../index.html',
      '/console/assets/..%2f..%2fpackage.json',
      '/console/assets/%2e%2e/%2e%2e/package.json',
      '/console/../package.json',
      '/console/resources/../../package.json',
      '/console/resources/%2e%2e/%2e%2e/package.json',
      '/console/resources/..%2f..%2fpackage.json',
      '/console/resources/a%5c..%5cpackage.json',
      '/console/resources/%00',
      '/console/index.html',
      '/console/favicon.ico',
      '/console/src/main.tsx',
      '/console/unknown',
      '/consoles',
      '/index.html',
    ]) {
      const response = await t.app.inject({ method: 'GET', url });
      expect([url, response.statusCode]).toEqual([url, 404]);
      expect(response.json()).toMatchObject({ resourceType: 'OperationOutcome', issue: [{ code: 'not-found' }] });
      expect(response.headers['cache-control']).toBe('no-store');
      expect(response.body).not.toContain('"dependencies"');
    }
    // A malformed escape never reaches the console's routes: Fastify refuses the URL itself.
    const malformed = await t.app.inject({ method: 'GET', url: '/console/resources/%E0%A4%A' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json()).toMatchObject({ resourceType: 'OperationOutcome' });
  });

  it('leaves the API as it is: no token, no data; a token, the data; no-store and the sandbox CSP', async () => {
    const withoutToken = await t.app.inject({ method: 'GET', url: '/fhir/Patient' });
    expect(withoutToken.statusCode).toBe(401);
    expect(withoutToken.headers['www-authenticate']).toMatch(/^Bearer/);
    const token = await t.token('system/Patient.rs');
    const withToken = await t.app.inject({
      method: 'GET',
      url: '/fhir/Patient',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(withToken.statusCode).toBe(200);
    expect(withToken.json()).toMatchObject({ resourceType: 'Bundle', type: 'searchset' });
    expect(withToken.headers['cache-control']).toBe('no-store');
    expect(withToken.headers['content-security-policy']).toBe("default-src 'none'; frame-ancestors 'none'; sandbox");
  });
});
