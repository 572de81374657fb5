// The package as an operator installs it (docs/deploy.md, "From a package"): `npm pack` in a fresh copy of
// the checkout (no dist/ or generated/: packing builds them), then `npm install -g` of the tarball into a
// prefix of its own, and the installed `ambient-fhir` serves the API on SQLite: an account made with the
// installed command, a token, a Patient created and found over HTTP. Nothing is compiled from TypeScript at
// install: the tarball holds no TypeScript, and neither TypeScript nor any other development dependency is
// installed with it. The SQLite interrupt extension is compiled at install (the package's install script).
//
// In the long suites only (npm run test:full): the install builds better-sqlite3 from its sources, about a
// minute and a half on 2 cores, and needs the npm registry or an npm cache holding the dependencies (as
// `npm ci` leaves it).
import { randomUUID } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runProcess } from './support/cli-process.js';
import { fhirClient, passwordToken } from './support/fhir-client.js';
import type { Bundle } from './support/fhir-client.js';
import { httpInject } from './support/http-inject.js';
import { startServerProcess } from './support/server-process.js';
import { FULL } from './support/full-tests.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
if (!FULL) console.log('package suite skipped: it runs with the long suites (npm run test:full)');

const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  devDependencies: Record<string, string>;
};

/** What a fresh clone lacks: the build's output and local data at the top, installed packages anywhere. */
const NOT_IN_A_CLONE = new Set(['dist', 'generated', 'data', 'coverage']);
const inAClone = (path: string): boolean => {
  const parts = relative(ROOT, path).split(sep);
  return !NOT_IN_A_CLONE.has(parts[0]) && !parts.some((part) => part === 'node_modules' || part === '.git');
};

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment of a shell, not of the `npm run` this suite may run under: npm's settings for the
 * package it runs (among them its folder as npm's prefix) go, and so do the checkout's node_modules/.bin
 * folders on the PATH (nothing at install may find `tsc`) and NODE_OPTIONS (nothing may bring tsx).
 */
function shellEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (/^npm_(?!config_)/.test(name) || /^npm_config_(local_|global_)?prefix$/.test(name)) delete env[name];
  }
  delete env.NODE_OPTIONS;
  env.PATH = (env.PATH ?? '')
    .split(delimiter)
    .filter((dir) => !dir.includes(`node_modules${sep}.bin`))
    .join(delimiter);
  return { ...env, ...extra };
}

function run(
  file: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv; input?: string },
): Promise<Result> {
  return runProcess(file, args, { ...options, env: options.env ?? shellEnv() });
}

interface Packed {
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string }[];
}

describe.skipIf(!FULL)('npm pack, then npm install -g of the tarball', () => {
  let dir: string;
  let prefix: string;
  let command: string;
  let installed: string;
  let packed: Packed;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ambient-package-'));
    prefix = join(dir, 'prefix');
    command = join(prefix, 'bin', 'ambient-fhir');
    installed = join(prefix, 'lib', 'node_modules', 'ambient-fhir');
    const clone = join(dir, 'clone');
    cpSync(ROOT, clone, { recursive: true, filter: inAClone });
    symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(clone, 'node_modules'));
    const pack = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: clone });
    expect(pack.code, pack.stderr).toBe(0);
    packed = (JSON.parse(pack.stdout.slice(pack.stdout.indexOf('[\n'))) as Packed[])[0];
    mkdirSync(prefix);
    // --prefer-offline: the dependencies from npm's cache where it has them (`npm ci` filled it).
    const install = await run(
      'npm',
      ['install', '--global', '--prefix', prefix, '--prefer-offline', join(dir, packed.filename)],
      { cwd: dir },
    );
    expect(install.code, install.stderr).toBe(0);
  }, 900_000);

  afterAll(() => dir && rmSync(dir, { recursive: true, force: true }));

  it('packs the compiled server, the R4 definitions and terminology and the extension source: no TypeScript, tests or source maps', () => {
    const paths = packed.files.map((f) => f.path);
    for (const path of [
      'bin/ambient-fhir.js',
      'dist/main.js',
      'dist/storage/sqlite/read-worker.js',
      'generated/r4.json',
      'generated/r4-terminology.json.gz',
      'native/sqlite-interrupt.c',
      'scripts/build-native.mjs',
      'README.md',
      'LICENSE',
      'docs/deploy.md',
      'dist/console/index.html',
    ]) {
      expect(paths).toContain(path);
    }
    const top = ['bin/', 'dist/', 'docs/', 'generated/', 'native/', 'scripts/', 'README.md', 'LICENSE', 'package.json'];
    expect(paths.filter((p) => !top.some((t) => p.startsWith(t)))).toEqual([]);
    expect(paths.filter((p) => /\.ts$|\.map$|\.test\.|^src\/|^test\//.test(p))).toEqual([]);
    // Small: every test fixture (8 MB) stays out.
    expect(packed.unpackedSize).toBeLessThan(5_000_000);
  });

  it('installs no development dependency, and compiled the SQLite interrupt extension at install', () => {
    expect(existsSync(join(installed, 'dist', 'main.js'))).toBe(true);
    const present = Object.keys(manifest.devDependencies).filter(
      (name) =>
        existsSync(join(installed, 'node_modules', name)) || existsSync(join(prefix, 'lib', 'node_modules', name)),
    );
    expect(present).toEqual([]);
    expect(existsSync(join(installed, 'generated', 'sqlite-interrupt.so'))).toBe(true);
  });

  it('ambient-fhir --version prints the version of package.json', async () => {
    const result = await run(command, ['--version'], { cwd: dir });
    expect(result).toEqual({ code: 0, stdout: `${manifest.version}\n`, stderr: '' });
  });

  it('serves the API: an account from the installed command, a token, a Patient created and found', async () => {
    const work = mkdtempSync(join(dir, 'run-'));
    const env = { DATABASE_URL: `sqlite:${join(work, 'ambient.db')}` };
    const username = `pkg-${randomUUID().slice(0, 8)}`;
    const password = `pw-${randomUUID()}`;
    const created = await run(command, ['account', 'create', username, '--password-stdin'], {
      cwd: work,
      env: shellEnv(env),
      input: `${password}\n`,
    });
    expect(created.code, created.stderr).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ username, active: true });

    const server = await startServerProcess(env, [], { command: [command], cwd: work });
    const target = httpInject(server.url);
    try {
      const fhir = fhirClient(target, await passwordToken(target, username, password));
      const metadata = await fhir.get('/fhir/metadata');
      expect(metadata.json<{ software: { version: string } }>().software.version).toBe(manifest.version);

      const family = `Packaged${randomUUID().slice(0, 8)}`;
      const create = await fhir.create({ resourceType: 'Patient', name: [{ family, given: ['Ada'] }] });
      expect(create.statusCode, create.body).toBe(201);
      const patient = create.json<{ id: string; name: { family: string }[]; meta: { versionId: string } }>();
      expect(patient).toMatchObject({ name: [{ family }], meta: { versionId: '1' } });

      // The web console, built by the pack and served by the installed command.
      const page = await target.inject({ method: 'GET', url: '/console', headers: {} });
      expect(page.statusCode).toBe(200);
      expect(page.body).toMatch(/<script type="module" crossorigin src="\/console\/assets\/[\w-]+\.js">/);

      const search = await fhir.get(`/fhir/Patient?family=${family}`);
      expect(search.statusCode, search.body).toBe(200);
      const bundle = search.json<Bundle>();
      expect(bundle).toMatchObject({ resourceType: 'Bundle', type: 'searchset' });
      expect(bundle.entry?.map((e) => e.resource?.id)).toEqual([patient.id]);
    } finally {
      target.close();
      server.child.kill('SIGTERM');
      await server.exited;
    }
    expect(server.output()).not.toMatch(/interrupt extension not loaded/);
  });
});
