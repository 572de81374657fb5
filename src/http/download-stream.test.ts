import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { acceptsGzip, DOWNLOAD_BUFFER_BYTES, DownloadStream } from './download-stream.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** 100 pieces of 16 KiB, counting how many were pulled. */
function source() {
  const counter = { pulled: 0, closed: false };
  async function* pieces() {
    try {
      for (let i = 0; i < 100; i++) {
        counter.pulled++;
        yield Buffer.alloc(16 * 1024, i);
      }
    } finally {
      counter.closed = true;
    }
  }
  return { counter, pieces: pieces() };
}

describe('DownloadStream', () => {
  it('pulls only what its buffer holds while nobody reads, then reports the idle reader', async () => {
    const { counter, pieces } = source();
    let idle = 0;
    const stream = new DownloadStream(pieces, 200, () => idle++);
    stream.pause();
    stream.read(0);
    await sleep(50);
    expect(counter.pulled).toBeLessThanOrEqual(DOWNLOAD_BUFFER_BYTES / (16 * 1024) + 1);
    expect(idle).toBe(0);
    await sleep(400);
    expect(idle).toBe(1);
    stream.destroy();
    await sleep(10);
    expect(counter.closed).toBe(true);
  });

  it('never reports a reader that keeps reading, however slowly', async () => {
    const { counter, pieces } = source();
    let idle = 0;
    // Gaps of ~5 ms between reads against a timeout of 2 s: generous for a loaded machine.
    const stream = new DownloadStream(pieces, 2000, () => idle++);
    let bytes = 0;
    const slow = new Writable({
      highWaterMark: 16 * 1024,
      write(chunk: Buffer, _encoding, callback) {
        bytes += chunk.length;
        setTimeout(callback, 5);
      },
    });
    await new Promise((resolve) => stream.pipe(slow).on('finish', resolve));
    expect(bytes).toBe(100 * 16 * 1024);
    expect(counter.pulled).toBe(100);
    expect(idle).toBe(0);
  });
});

describe('acceptsGzip', () => {
  it.each([
    ['gzip', true],
    ['gzip, deflate, br', true],
    ['br;q=1, gzip;q=0.5', true],
    ['x-gzip', true],
    ['*', true],
    ['GZIP;Q=0.1', true],
    ['gzip;q=0', false],
    ['*;q=0', false],
    ['br', false],
    ['identity', false],
    ['', false],
    [undefined, false],
    ['*;q=0.5, gzip;q=0', false],
  ])('%s → %s', (header, expected) => {
    expect(acceptsGzip(header)).toBe(expected);
  });
});
