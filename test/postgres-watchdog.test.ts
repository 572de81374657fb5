// The watchdog that keeps an embedded test PostgreSQL from outliving a killed test run
// (test/support/postgres-watchdog.mjs), with stand-ins: a sleeping process as the run, another as the
// server (its pid in a postmaster.pid, as PostgreSQL writes it).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const WATCHDOG = fileURLToPath(new URL('./support/postgres-watchdog.mjs', import.meta.url));
const children: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function sleeper(): ChildProcess {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  children.push(child);
  return child;
}

const ended = (child: ChildProcess) =>
  new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));

function fakeDataDir(serverPid: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'watchdog-test-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'postmaster.pid'), `${serverPid}\n${dir}\n`);
  return dir;
}

describe('postgres watchdog', () => {
  it('stops the server and deletes its folder once the test run is gone', async () => {
    const run = sleeper();
    const server = sleeper();
    const serverEnded = ended(server);
    const dir = fakeDataDir(server.pid!);
    const watchdog = spawn(process.execPath, [WATCHDOG, String(run.pid), dir], { stdio: 'ignore' });
    children.push(watchdog);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(existsSync(dir), 'nothing happens while the run is alive').toBe(true);
    run.kill('SIGKILL');
    expect(await serverEnded).toBe('SIGINT');
    await ended(watchdog);
    expect(existsSync(dir)).toBe(false);
  });

  it('leaves when the run has stopped its server itself (the folder is gone)', async () => {
    const run = sleeper();
    const dir = fakeDataDir(0);
    const watchdog = spawn(process.execPath, [WATCHDOG, String(run.pid), dir], { stdio: 'ignore' });
    children.push(watchdog);
    const watchdogEnded = ended(watchdog);
    rmSync(dir, { recursive: true });
    expect(await watchdogEnded).toBe(0);
    expect(run.exitCode).toBe(null);
  });
});
