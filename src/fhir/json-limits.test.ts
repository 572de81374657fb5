import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { jsonDepth, JsonLimitScanner, MAX_JSON_DEPTH, MAX_JSON_VALUES, parseJsonBytes } from './json-limits.js';

/** Feeds `text` to a fresh scanner in pieces cut at `cuts` (byte offsets); the refusal's code, or 'ok'. */
function scan(text: string, cuts: number[]): string {
  const bytes = Buffer.from(text);
  const scanner = new JsonLimitScanner('The body');
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  try {
    for (const to of [...points, bytes.length]) {
      scanner.feed(bytes.subarray(from, to));
      from = to;
    }
    return 'ok';
  } catch (error) {
    return error instanceof AppError ? error.code : String(error);
  }
}

/** Strings full of what a scanner could mistake for structure: quotes, backslashes, brackets, commas. */
const tricky = fc.string({
  unit: fc.constantFrom('"', '\\', '[', ']', '{', '}', ',', 'a', 'é', '\u2028'),
  maxLength: 12,
});
const value = fc.letrec<{ json: unknown }>((tie) => ({
  json: fc.oneof(
    { depthSize: 'small' },
    tricky,
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('json'), { maxLength: 4 }),
    fc.dictionary(tricky, tie('json'), { maxKeys: 4 }),
  ),
})).json;

describe('JsonLimitScanner', () => {
  it('agrees with the parsed depth, however the text is cut into chunks (escapes split across them included)', () => {
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 70 }), fc.array(fc.nat(), { maxLength: 8 }), (json, wrap, cuts) => {
        const text = '['.repeat(wrap) + JSON.stringify(json) + ']'.repeat(wrap);
        const depth = jsonDepth(JSON.parse(text));
        expect(scan(text, cuts)).toBe(depth > MAX_JSON_DEPTH ? 'invalid-json' : 'ok');
      }),
      { numRuns: 500 },
    );
  });

  it('counts values: a million pass, one more is refused (413) wherever the chunks end', () => {
    // The array and the elements after its first: n elements are n values.
    const atLimit = `[${'0,'.repeat(MAX_JSON_VALUES - 1)}0]`;
    expect(scan(atLimit, [1000, 77_777])).toBe('ok');
    expect(scan(`[${'0,'.repeat(MAX_JSON_VALUES)}0]`, [3, 1_500_001])).toBe('payload-too-large');
    // Commas and brackets inside strings are no values.
    expect(scan(JSON.stringify({ text: ','.repeat(MAX_JSON_VALUES + 1) + '[{'.repeat(100) }), [5, 9])).toBe('ok');
  });

  it('stops at the byte past the depth bound, whatever follows', () => {
    const scanner = new JsonLimitScanner('The body');
    expect(() => scanner.feed(Buffer.from('['.repeat(MAX_JSON_DEPTH)))).not.toThrow();
    expect(() => scanner.feed(Buffer.from('['))).toThrow(`nested deeper than ${MAX_JSON_DEPTH} levels`);
  });

  it('parseJsonBytes scans what it was not told was scanned', () => {
    expect(() => parseJsonBytes(Buffer.from('['.repeat(65) + ']'.repeat(65)), 'The patch')).toThrow(
      'The patch is nested deeper than 64 levels',
    );
    expect(parseJsonBytes(Buffer.from('{"a":[1,"\\\\\\"[",{}]}'), 'The patch')).toEqual({ a: [1, '\\"[', {}] });
  });
});
