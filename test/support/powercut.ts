// The power-cut layer (test/powercut/powercut-fs.c) from a test: built with cc against libfuse3, mounted
// over a backing folder, cut, unmounted and mounted again. `powercutUnavailable()` says why it cannot run
// here (no /dev/fuse, not root, no compiler or libfuse3), for the tests to skip with that reason.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SOURCE = join(ROOT, 'test', 'powercut', 'powercut-fs.c');
const BINARY = join(ROOT, 'generated', 'powercut-fs');

let built: string | undefined;

/** Builds the layer when its source is newer than the binary; the reason it cannot, or undefined. */
function build(): string | undefined {
  if (existsSync(BINARY) && statSync(BINARY).mtimeMs >= statSync(SOURCE).mtimeMs) return undefined;
  const flags = spawnSync('pkg-config', ['--cflags', '--libs', 'fuse3'], { encoding: 'utf8' });
  if (flags.status !== 0) return `pkg-config finds no fuse3 (apt-get install libfuse3-dev): ${flags.stderr.trim()}`;
  mkdirSync(join(ROOT, 'generated'), { recursive: true });
  const compiled = spawnSync(
    process.env.CC || 'cc',
    ['-O2', '-Wall', '-o', BINARY, SOURCE, ...flags.stdout.trim().split(/\s+/)],
    { encoding: 'utf8' },
  );
  if (compiled.error) return `no C compiler: ${compiled.error.message}`;
  if (compiled.status !== 0) return `cc failed: ${compiled.stderr.trim()}`;
  return undefined;
}

/** Why the layer cannot run on this machine, or undefined when it can (then it is built). */
export function powercutUnavailable(): string | undefined {
  if (built !== undefined) return built || undefined;
  const reason = !existsSync('/dev/fuse')
    ? 'no /dev/fuse'
    : process.getuid?.() !== 0
      ? 'not root (mounting FUSE here needs root)'
      : !existsSync('/usr/bin/fusermount3') && !existsSync('/bin/fusermount3')
        ? 'no fusermount3 (apt-get install fuse3)'
        : build();
  built = reason ?? '';
  return reason;
}

export interface PowercutCounters {
  readonly [name: string]: number;
}

function mounted(mountpoint: string): boolean {
  return readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[1] === mountpoint && line.includes('fuse.powercut-fs'));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The layer mounted at `mountpoint` over `backing`: what is written under the mountpoint can be cut. */
export class PowercutMount {
  private daemon: ChildProcess | undefined;
  private exited: Promise<unknown> | undefined;
  private log = '';

  constructor(
    readonly backing: string,
    readonly mountpoint: string,
  ) {}

  async mount(): Promise<void> {
    mkdirSync(this.backing, { recursive: true });
    mkdirSync(this.mountpoint, { recursive: true });
    // -f: stays a child of this process; -s: one thread (the layer serialises everything anyway).
    const daemon = spawn(BINARY, [this.backing, this.mountpoint, '-f', '-s'], { stdio: ['ignore', 'ignore', 'pipe'] });
    daemon.stderr!.on('data', (chunk: Buffer) => (this.log = (this.log + chunk.toString()).slice(-10_000)));
    this.exited = new Promise((resolve) => daemon.on('exit', resolve));
    this.daemon = daemon;
    for (let i = 0; i < 200 && !mounted(this.mountpoint); i++) {
      if (daemon.exitCode !== null) break;
      await sleep(25);
    }
    if (!mounted(this.mountpoint)) throw new Error(`powercut-fs did not mount ${this.mountpoint}: ${this.log}`);
  }

  private control(command: 'cut' | 'sync'): void {
    writeFileSync(join(this.mountpoint, '.powercut'), command);
  }

  /** The power goes off: everything not made durable is thrown away; the file system fails from now on. */
  cut(): void {
    this.control('cut');
  }

  /** Everything written so far becomes durable (as syncfs). */
  sync(): void {
    this.control('sync');
  }

  /** The layer's counters (pending and lost bytes, files reverted, directory changes undone...). */
  counters(): PowercutCounters {
    const text = readFileSync(join(this.mountpoint, '.powercut'), 'utf8');
    return Object.fromEntries(
      text
        .trim()
        .split('\n')
        .map((line) => {
          const [name, value] = line.split(' ');
          return [name, Number(value)];
        }),
    );
  }

  /** Unmounts (after a cut: what the backing folder holds is what survived) and waits for the daemon. */
  async unmount(): Promise<void> {
    if (!this.daemon) return;
    const daemon = this.daemon;
    for (let attempt = 0; mounted(this.mountpoint); attempt++) {
      // Busy while a process killed a moment ago still has files open: the kernel closes them shortly.
      // Still busy after 5 s (a process left running): detach it, and end the layer below.
      const result = spawnSync('fusermount3', ['-u', this.mountpoint], { encoding: 'utf8' });
      if (result.status === 0) break;
      if (attempt >= 100) {
        execFileSync('umount', ['-l', this.mountpoint]);
        break;
      }
      await sleep(50);
    }
    const timer = setTimeout(() => daemon.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(timer);
    this.daemon = undefined;
  }

  /** The power comes back: a fresh layer (and a fresh kernel cache) over what survived. */
  async remount(): Promise<void> {
    await this.unmount();
    await this.mount();
  }
}
