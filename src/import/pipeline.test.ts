import { describe, expect, it } from 'vitest';
import { ChunkPipeline } from './pipeline.js';

/** A write that resolves when told to, recording when it started and ended. */
function gate(log: string[], name: string, ok = true) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return {
    open,
    write: async () => {
      log.push(`start ${name}`);
      await opened;
      log.push(`end ${name}`);
      return ok;
    },
    retry: async () => {
      log.push(`retry ${name}`);
    },
  };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('ChunkPipeline', () => {
  it('keeps up to width chunks in flight and starts the next when one is done', async () => {
    const log: string[] = [];
    const pipeline = new ChunkPipeline(2);
    const [a, b, c] = ['a', 'b', 'c'].map((n) => gate(log, n));
    await pipeline.add(new Set(['A']), a.write, a.retry);
    await pipeline.add(new Set(['B']), b.write, b.retry);
    const third = pipeline.add(new Set(['C']), c.write, c.retry);
    await tick();
    expect(log).toEqual(['start a', 'start b']);
    b.open();
    await third;
    expect(log).toEqual(['start a', 'start b', 'end b', 'start c']);
    a.open();
    c.open();
    await pipeline.drain();
    expect(log.slice(-2).sort()).toEqual(['end a', 'end c']);
  });

  it('runs one chunk at a time with width 1', async () => {
    const log: string[] = [];
    const pipeline = new ChunkPipeline(1);
    const [a, b] = ['a', 'b'].map((n) => gate(log, n));
    await pipeline.add(new Set(['A']), a.write, a.retry);
    const second = pipeline.add(new Set(['B']), b.write, b.retry);
    await tick();
    expect(log).toEqual(['start a']);
    a.open();
    b.open();
    await second;
    await pipeline.drain();
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b']);
  });

  it('starts a chunk writing a resource of a chunk in flight only after every chunk before it', async () => {
    const log: string[] = [];
    const pipeline = new ChunkPipeline(3);
    const [a, b, c] = ['a', 'b', 'c'].map((n) => gate(log, n));
    await pipeline.add(new Set(['Patient/1']), a.write, a.retry);
    await pipeline.add(new Set(['Patient/2']), b.write, b.retry);
    const third = pipeline.add(new Set(['Patient/1', 'Patient/3']), c.write, c.retry);
    await tick();
    expect(log).toEqual(['start a', 'start b']);
    a.open();
    await tick();
    expect(log).toEqual(['start a', 'start b', 'end a']);
    b.open();
    await third;
    c.open();
    await pipeline.drain();
    expect(log).toEqual(['start a', 'start b', 'end a', 'end b', 'start c', 'end c']);
  });

  it('retries a failed chunk only once every chunk started before it is done', async () => {
    const log: string[] = [];
    const pipeline = new ChunkPipeline(3);
    const a = gate(log, 'a');
    const b = gate(log, 'b', false);
    await pipeline.add(new Set(['A']), a.write, a.retry);
    await pipeline.add(new Set(['B']), b.write, b.retry);
    b.open();
    await tick();
    expect(log).toEqual(['start a', 'start b', 'end b']);
    a.open();
    await pipeline.drain();
    expect(log).toEqual(['start a', 'start b', 'end b', 'end a', 'retry b']);
  });

  it('throws what a chunk threw from the next drain, without an unhandled rejection', async () => {
    const pipeline = new ChunkPipeline(2);
    await pipeline.add(
      new Set(),
      async () => {
        throw new Error('disk gone');
      },
      async () => undefined,
    );
    await expect(pipeline.drain()).rejects.toThrow('disk gone');
  });
});
