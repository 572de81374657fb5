import { describe, expect, it } from 'vitest';
import { WalSync } from './wal-sync.js';

/** An fsync whose calls are counted and finished by hand. */
function manualFsync() {
  const pending: (() => void)[] = [];
  return {
    fsync: () => new Promise<void>((resolve) => pending.push(resolve)),
    calls: () => pending.length,
    finish: async (call: number) => {
      pending[call]();
      // Let the promise chains run.
      for (let i = 0; i < 5; i++) await Promise.resolve();
    },
  };
}

function settled(promise: Promise<unknown>): () => boolean {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  return () => done;
}

describe('WalSync', () => {
  it('answers a caller only after an fsync that started after its call', async () => {
    const disk = manualFsync();
    const sync = new WalSync(disk.fsync);
    const first = settled(sync.sync());
    expect(disk.calls()).toBe(1);
    // Written while the first fsync runs: that fsync may not cover it.
    const second = settled(sync.sync());
    const third = settled(sync.sync());
    expect(disk.calls()).toBe(1);
    await disk.finish(0);
    expect(first()).toBe(true);
    expect(second()).toBe(false);
    // The two late callers share the next fsync.
    expect(disk.calls()).toBe(2);
    await disk.finish(1);
    expect(second()).toBe(true);
    expect(third()).toBe(true);
    expect(disk.calls()).toBe(2);
  });

  it('fails every later caller once an fsync has failed (fail-stop: a retry would wrongly succeed)', async () => {
    let fail = true;
    let calls = 0;
    const sync = new WalSync(() => {
      calls++;
      return fail ? Promise.reject(new Error('EIO')) : Promise.resolve();
    });
    await expect(sync.sync()).rejects.toThrow('EIO');
    fail = false;
    await expect(sync.sync()).rejects.toThrow('EIO');
    expect(calls).toBe(1);
    expect(sync.failure).toEqual(new Error('EIO'));
  });
});
