import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { readJsonText, readLines, TooLongError } from './sources.js';

const dir = mkdtempSync(join(tmpdir(), 'ambient-sources-'));

async function linesOf(path: string, max?: number) {
  const out: { line: number; text?: string; tooLong?: true }[] = [];
  for await (const entry of readLines(path, max)) out.push(entry);
  return out;
}

describe('readLines', () => {
  // A line of 150,000 characters spans several of the stream's 64 KiB chunks.
  const long = `{"a":"${'x'.repeat(150_000)}"}`;
  const text = ['{"n":1}', '', '{"n":2}\r', long, '   ', `{"b":"${'y'.repeat(300_000)}"}`, '{"n":3}'].join('\n');

  it.each([
    ['plain', 'lines.ndjson', Buffer.from(text)],
    ['gzipped', 'lines.ndjson.gz', gzipSync(text)],
  ])(
    '%s: numbered lines without blanks or CR, a long line whole, and one past the limit reported',
    async (_, name, bytes) => {
      const path = join(dir, name);
      writeFileSync(path, bytes);
      expect(await linesOf(path, 200_000)).toEqual([
        { line: 1, text: '{"n":1}' },
        { line: 3, text: '{"n":2}' },
        { line: 4, text: long },
        { line: 6, tooLong: true },
        { line: 7, text: '{"n":3}' },
      ]);
    },
  );

  it('reports a last line past the limit, and ends a file without a final newline', async () => {
    const path = join(dir, 'tail.ndjson');
    writeFileSync(path, `{"n":1}\n${'z'.repeat(100)}`);
    expect(await linesOf(path, 50)).toEqual([
      { line: 1, text: '{"n":1}' },
      { line: 2, tooLong: true },
    ]);
    writeFileSync(path, '{"n":1}\n{"n":2}');
    expect(await linesOf(path)).toEqual([
      { line: 1, text: '{"n":1}' },
      { line: 2, text: '{"n":2}' },
    ]);
  });
});

describe('readJsonText', () => {
  it('reads plain and gzipped files up to the limit and refuses longer ones', () => {
    const json = JSON.stringify({ resourceType: 'Bundle', note: 'é'.repeat(100) });
    writeFileSync(join(dir, 'b.json'), json);
    writeFileSync(join(dir, 'b.json.gz'), gzipSync(json));
    expect(readJsonText(join(dir, 'b.json'), json.length)).toBe(json);
    expect(readJsonText(join(dir, 'b.json.gz'), json.length)).toBe(json);
    expect(() => readJsonText(join(dir, 'b.json'), json.length - 1)).toThrow(TooLongError);
    expect(() => readJsonText(join(dir, 'b.json.gz'), json.length - 1)).toThrow(TooLongError);
    // A gzip bomb stops at four bytes a character, before it is all inflated.
    writeFileSync(join(dir, 'bomb.json.gz'), gzipSync(Buffer.alloc(10_000_000, 0x20)));
    expect(() => readJsonText(join(dir, 'bomb.json.gz'), 1000)).toThrow(TooLongError);
  });
});
