// `serve` caps V8's young generation itself, however it was started: Node 24 sizes it from the
// machine's memory (two 64 MB semi-spaces here), which took a server's RSS from 199 to 336 MB over
// test/memory-bounds.int.test.ts's searches. Checked on the process's own command line in /proc.
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_SEMI_SPACE_MB } from '../src/cli/heap.js';
import { sqliteTestDatabase } from './support/databases.js';
import type { TestDatabase } from './support/databases.js';
import { startServerProcess } from './support/server-process.js';
import type { ServerProcess } from './support/server-process.js';

const canReplaceItself = typeof (process as { execve?: unknown }).execve === 'function';

function commandLine(pid: number): string[] {
  return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
}

describe.skipIf(process.platform !== 'linux')('the node flags of serve', () => {
  let server: ServerProcess | undefined;
  let database: TestDatabase | undefined;

  afterEach(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await database?.dispose();
  });

  it.runIf(canReplaceItself)(
    'restarts itself with the young generation capped, in the same process',
    async () => {
      database = sqliteTestDatabase();
      server = await startServerProcess({ DATABASE_URL: database.url });
      const args = commandLine(server.child.pid!);
      expect(args[0]).toBe(process.execPath);
      expect(args[1]).toBe(`--max-semi-space-size=${MAX_SEMI_SPACE_MB}`);
      expect(args.slice(2)).toEqual(['--import', 'tsx', expect.stringMatching(/src\/main\.ts$/), 'serve']);
      // Read to the end: a response the client leaves unread holds the server's drain at shutdown.
      const metadata = await fetch(`${server.url}/fhir/metadata?_summary=true`);
      expect(((await metadata.json()) as { resourceType: string }).resourceType).toBe('CapabilityStatement');
    },
    60_000,
  );

  it("leaves the operator's choice in NODE_OPTIONS as it is", async () => {
    database = sqliteTestDatabase();
    server = await startServerProcess({ DATABASE_URL: database.url, NODE_OPTIONS: '--max-semi-space-size=4' });
    expect(commandLine(server.child.pid!)).toEqual([process.execPath, '--import', 'tsx', 'src/main.ts', 'serve']);
  }, 60_000);
});
