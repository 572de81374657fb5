import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { EMPTY_GZIP, gzipEnd, gzipPiece } from './gzip-file.js';
import type { GzipState } from './gzip-file.js';

const lines = (from: number, n: number) =>
  Buffer.from(Array.from({ length: n }, (_, i) => `{"resourceType":"Patient","id":"p${from + i}"}\n`).join(''));

async function write(texts: Buffer[], state: GzipState = EMPTY_GZIP): Promise<{ data: Buffer; state: GzipState }> {
  const pieces: Buffer[] = [];
  for (const text of texts) {
    const piece = await gzipPiece(state, text);
    pieces.push(piece.data);
    state = piece.state;
  }
  return { data: Buffer.concat(pieces), state };
}

describe('a gzip file written a piece at a time', () => {
  it('is one gzip stream of all the text, its trailer counting every byte', async () => {
    const texts = [lines(0, 500), lines(500, 3), lines(503, 2000)];
    const body = await write(texts);
    const end = gzipEnd(body.state);
    const file = Buffer.concat([body.data, end.data]);
    expect(gunzipSync(file)).toEqual(Buffer.concat(texts));
    expect(end.state.bytes).toBe(file.length);
    expect(end.state.textBytes).toBe(Buffer.concat(texts).length);
    // One member: a decoder that stops at the first member's end still gets everything.
    expect(file.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    expect(file.indexOf(Buffer.from([0x1f, 0x8b, 8]), 1)).toBe(-1);
  });

  it('resumes from a saved state (as JSON) to the same bytes as a run that never stopped', async () => {
    const texts = [lines(0, 100), lines(100, 100), lines(200, 100)];
    const whole = await write(texts);
    const first = await write(texts.slice(0, 1));
    const saved = JSON.parse(JSON.stringify(first.state)) as GzipState;
    const rest = await write(texts.slice(1), saved);
    expect(Buffer.concat([first.data, rest.data])).toEqual(whole.data);
    expect(rest.state).toEqual(whole.state);
  });

  it('ends an empty file as a valid empty gzip stream', () => {
    expect(gunzipSync(gzipEnd(EMPTY_GZIP).data).length).toBe(0);
  });
});
