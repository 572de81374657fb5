// The console's file list (http/console.ts) on folders made here: what start-up reads and refuses, the
// page's asset paths behind a proxy's prefix, which paths are the page's routes, and an unbuilt console.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { consoleRoutes, isClientRoute, loadConsoleFiles } from './console.js';

const PAGE = '<!doctype html><script type="module" src="/console/assets/app-AbCd1234.js"></script>';
const folders: string[] = [];

function built(): string {
  const dir = mkdtempSync(join(tmpdir(), 'ambient-console-unit-'));
  folders.push(dir);
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'index.html'), PAGE);
  writeFileSync(join(dir, 'assets', 'app-AbCd1234.js'), 'console.log(1)');
  return dir;
}

afterEach(() => {
  for (const dir of folders.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('loadConsoleFiles', () => {
  it('reads the page and the assets of known types with plain names, nothing else', () => {
    const dir = built();
    writeFileSync(join(dir, 'assets', '.hidden.js'), 'x');
    writeFileSync(join(dir, 'assets', 'notes.txt'), 'x');
    mkdirSync(join(dir, 'assets', 'sub.js'));
    writeFileSync(join(dir, 'outside.js'), 'secret');
    symlinkSync(join(dir, 'outside.js'), join(dir, 'assets', 'link.js'));
    const files = loadConsoleFiles(dir)!;
    expect([...files.assets.keys()]).toEqual(['app-AbCd1234.js']);
    expect(files.assets.get('app-AbCd1234.js')!.body.toString()).toBe('console.log(1)');
    expect(files.page.body.toString()).toBe(PAGE);
  });

  it("names the assets under the public address's path prefix", () => {
    const files = loadConsoleFiles(built(), '/ehr/fhir-server')!;
    expect(files.page.body.toString()).toContain('src="/ehr/fhir-server/console/assets/app-AbCd1234.js"');
  });

  it('is undefined where the console is not built', () => {
    expect(loadConsoleFiles(join(tmpdir(), 'ambient-console-does-not-exist'))).toBeUndefined();
  });

  it('refuses a file over the bound at start-up', () => {
    const dir = built();
    writeFileSync(join(dir, 'assets', 'huge-AbCd1234.js'), Buffer.alloc(4 * 1024 * 1024 + 1));
    expect(() => loadConsoleFiles(dir)).toThrow(/larger than/);
  });
});

describe('isClientRoute', () => {
  it.each(['', '/', '/resources', '/resources/', '/resources/Patient/a.b-1', '/scribe/12', '/exports'])(
    'is the page at %s',
    (path) => expect(isClientRoute(path)).toBe(true),
  );
  it.each([
    '/assets',
    '/other',
    '/resources/..',
    '/resources/.',
    '/resources/%2e%2e',
    '/resources/%2E',
    '/resources/a%2fb',
    '/resources/a%5cb',
    '/resources/%00',
    '/resources/%E0%A4%A',
    '/resources//Patient',
  ])('is not the page at %s', (path) => expect(isClientRoute(path)).toBe(false));
});

describe('consoleRoutes', () => {
  it('redirects / under the prefix, and answers 404 saying so when the console is not built', async () => {
    const app = Fastify();
    await app.register(consoleRoutes, { files: undefined, publicPath: '/ehr' });
    const root = await app.inject({ method: 'GET', url: '/' });
    expect([root.statusCode, root.headers.location]).toEqual([302, '/ehr/console']);
    for (const url of ['/console', '/console/resources', '/console/assets/app-AbCd1234.js']) {
      const response = await app.inject({ method: 'GET', url });
      expect(response.statusCode).toBe(404);
      expect(response.json().issue[0].diagnostics).toMatch(/console is not built.*npm run build/);
    }
    await app.close();
  });
});
