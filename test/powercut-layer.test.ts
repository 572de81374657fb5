// The power-cut layer itself (test/powercut/powercut-fs.c), before anything relies on it: what a cut
// keeps and throws away, for file data (fsync, fdatasync, overwrites, truncation, appends) and for
// directory entries (create, rename, unlink, mkdir, made durable only by an fsync of the directory).
// Skipped, with the reason, where FUSE cannot run.
import {
  closeSync,
  existsSync,
  fdatasyncSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PowercutMount, powercutUnavailable } from './support/powercut.js';

const unavailable = powercutUnavailable();
if (unavailable) console.warn(`power-cut layer tests skipped: ${unavailable}`);

/** Writes `data` at `position` (or appends) and closes; `sync`: fsync or fdatasync before closing. */
function write(path: string, data: string, options: { position?: number; sync?: 'fsync' | 'fdatasync' } = {}) {
  const fd = openSync(path, options.position === undefined ? 'a' : existsSync(path) ? 'r+' : 'w');
  try {
    writeSync(fd, data, options.position);
    if (options.sync === 'fsync') fsyncSync(fd);
    if (options.sync === 'fdatasync') fdatasyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function fsyncPath(path: string) {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

describe.skipIf(unavailable)('power-cut layer', () => {
  let dir: string;
  let layer: PowercutMount;
  const at = (name: string) => join(layer.mountpoint, name);

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ambient-powercut-'));
    layer = new PowercutMount(join(dir, 'backing'), join(dir, 'mnt'));
    await layer.mount();
  });
  afterEach(async () => {
    await layer.unmount();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Cuts, then mounts a fresh layer over what survived. */
  async function powerCut() {
    layer.cut();
    await layer.remount();
  }

  it('throws away data written but never fsynced, keeps what was fsynced', async () => {
    write(at('kept'), 'durable', { sync: 'fsync' });
    write(at('lost'), 'volatile');
    fsyncPath(layer.mountpoint);
    write(at('kept'), ' and more'); // appended after the fsync
    expect(readFileSync(at('kept'), 'utf8')).toBe('durable and more');
    expect(layer.counters().pending_bytes).toBe('volatile'.length + ' and more'.length);

    await powerCut();
    expect(readFileSync(at('kept'), 'utf8')).toBe('durable');
    expect(readFileSync(at('lost'), 'utf8')).toBe(''); // its name was durable, its data never was
  });

  it('keeps data made durable by fdatasync', async () => {
    write(at('f'), 'by fdatasync', { sync: 'fdatasync' });
    fsyncPath(layer.mountpoint);
    await powerCut();
    expect(readFileSync(at('f'), 'utf8')).toBe('by fdatasync');
  });

  it('puts overwritten blocks of a synced file back, across block boundaries and after truncation', async () => {
    const original = Array.from({ length: 3 * 4096 + 100 }, (_, i) => String.fromCharCode(97 + (i % 26))).join('');
    write(at('f'), original, { sync: 'fsync' });
    fsyncPath(layer.mountpoint);
    write(at('f'), 'X'.repeat(5000), { position: 4000 }); // spans blocks 0, 1 and 2
    truncateSync(at('f'), 100);
    write(at('f'), 'tail', { position: 20_000 }); // grows past the synced size, with a hole
    expect(readFileSync(at('f'), 'utf8')).not.toBe(original);

    await powerCut();
    expect(readFileSync(at('f'), 'utf8')).toBe(original);
  });

  it('an fsync of one handle covers what another handle wrote to the same file', async () => {
    write(at('f'), 'one', { sync: 'fsync' });
    fsyncPath(layer.mountpoint);
    const writer = openSync(at('f'), 'r+');
    writeSync(writer, 'two', 3);
    fsyncPath(at('f')); // a different handle
    writeSync(writer, 'three', 6); // after the fsync: lost
    closeSync(writer);
    await powerCut();
    expect(readFileSync(at('f'), 'utf8')).toBe('onetwo');
  });

  it('a file created and fsynced, but not synced with its directory, vanishes', async () => {
    write(at('orphan'), 'data fsynced', { sync: 'fsync' });
    mkdirSync(at('sub'));
    await powerCut();
    expect(readdirSync(layer.mountpoint)).toEqual([]);
  });

  it('an fsync of the directory makes its entries durable, in order (and those before them)', async () => {
    mkdirSync(at('sub'));
    write(at('sub/a'), 'a', { sync: 'fsync' });
    fsyncPath(at('sub')); // also makes `sub` itself durable: it was created before `sub/a`
    write(at('b'), 'b', { sync: 'fsync' }); // created after that fsync: not durable
    await powerCut();
    expect(readdirSync(layer.mountpoint)).toEqual(['sub']);
    expect(readFileSync(at('sub/a'), 'utf8')).toBe('a');
  });

  it('reverses a rename not synced with its directory, bringing back the file it replaced', async () => {
    write(at('target'), 'old target', { sync: 'fsync' });
    write(at('temp'), 'new target', { sync: 'fsync' });
    fsyncPath(layer.mountpoint);
    renameSync(at('temp'), at('target'));
    expect(readFileSync(at('target'), 'utf8')).toBe('new target');
    await powerCut();
    expect(readdirSync(layer.mountpoint).sort()).toEqual(['target', 'temp']);
    expect(readFileSync(at('target'), 'utf8')).toBe('old target');
    expect(readFileSync(at('temp'), 'utf8')).toBe('new target');
  });

  it('keeps a rename once the directory is fsynced (the replaced file is gone for good)', async () => {
    write(at('target'), 'old target', { sync: 'fsync' });
    write(at('temp'), 'new target', { sync: 'fsync' });
    fsyncPath(layer.mountpoint);
    renameSync(at('temp'), at('target'));
    fsyncPath(layer.mountpoint);
    await powerCut();
    expect(readdirSync(layer.mountpoint)).toEqual(['target']);
    expect(readFileSync(at('target'), 'utf8')).toBe('new target');
    expect(readdirSync(join(layer.backing, '.powercut-graveyard'))).toEqual([]);
  });

  it('brings back an unlinked file (with its synced content) unless the directory was fsynced', async () => {
    write(at('back'), 'synced', { sync: 'fsync' });
    write(at('gone'), 'synced too', { sync: 'fsync' });
    fsyncPath(layer.mountpoint);
    write(at('back'), ' unsynced');
    unlinkSync(at('back'));
    unlinkSync(at('gone'));
    fsyncPath(layer.mountpoint); // both removals durable...
    write(at('again'), 'x', { sync: 'fsync' });
    unlinkSync(at('again')); // ...this create and removal not
    await powerCut();
    expect(readdirSync(layer.mountpoint)).toEqual([]);

    write(at('back'), 'synced', { sync: 'fsync' });
    fsyncPath(layer.mountpoint);
    write(at('back'), ' unsynced', { position: 6 });
    unlinkSync(at('back'));
    await powerCut();
    expect(readFileSync(at('back'), 'utf8')).toBe('synced');
  });

  it('after the cut every operation fails (the disk is off); a clean unmount keeps everything', async () => {
    write(at('f'), 'unsynced');
    layer.cut();
    expect(() => readFileSync(at('f'))).toThrow(/EIO/);
    expect(() => writeFileSync(at('g'), 'x')).toThrow(/EIO/);
    expect(layer.counters()).toMatchObject({ dead: 1, cuts: 1, bytes_lost: 'unsynced'.length, dir_changes_undone: 1 });
    await layer.remount();
    expect(readdirSync(layer.mountpoint)).toEqual([]);

    write(at('f'), 'never fsynced');
    await layer.remount(); // unmounted cleanly, not cut
    expect(readFileSync(at('f'), 'utf8')).toBe('never fsynced');
  });
});
