import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LinearRegex, MAX_PROGRAM_SIZE, UnsupportedPattern } from './linear-regex.js';

// LinearRegex is re2js behind a JavaScript-syntax front: these tests check that ordinary patterns mean what
// they mean to RegExp, that runaway patterns are answered fast, and what is refused.

const counting = () => ({
  steps: 0,
  spend(n: number) {
    this.steps += n;
  },
});
const unlimited = counting();

/** The engine's match as JavaScript reports it: [index, ...groups], or null. */
function ours(pattern: string, input: string): (string | number | undefined)[] | null {
  const match = new LinearRegex(pattern).exec(input, 0, unlimited);
  if (!match) return null;
  const groups: (string | number | undefined)[] = [match[0]];
  for (let i = 0; i < match.length; i += 2) groups.push(match[i] < 0 ? undefined : input.slice(match[i], match[i + 1]));
  return groups;
}

function theirs(pattern: string, input: string): (string | number | undefined)[] | null {
  const match = new RegExp(pattern).exec(input);
  return match ? [match.index, ...match] : null;
}

describe('LinearRegex: the same matches as JavaScript RegExp', () => {
  const patterns = [
    'abc',
    'a|b|c',
    '^a.c$',
    'a*',
    'a+?',
    '(a|ab)(c|bcd)(d*)',
    '(a+)(b+)?',
    'x{2,3}',
    'x{2,}?y',
    '(?:ab){2}',
    '(?<year>\\d{4})-(?<month>\\d\\d)',
    '[a-c]+[^a-c]',
    '[\\d.-]+',
    '[-a]',
    '\\bfoo\\b',
    '\\Bo+',
    '\\s+\\S',
    '\\w+@\\w+\\.com',
    '^$',
    '(a|b)*?c',
    '\\x41\\u0042\\n?',
    '[^]',
    '[]',
    'a{',
    '\\.',
    '(?:)',
    '^[A-Za-z0-9\\-\\.]{1,64}$',
    '(\\s*([0-9a-zA-Z\\+/=]){4}\\s*)+',
    // JavaScript's meanings where RE2 spells them differently: `.` stops at \r, `\s` takes \v and NBSP.
    'a.b',
    '^.*$',
    '\\s',
    '[\\s]+',
    '\\S+',
    '[^\\S]',
    '[\\s\\S]{2}',
    '[\\b]',
    '\\cA|\\0',
    '\\uD83D\\uDE00|[\\u00e9]',
    '/',
    // Ordinary FHIR patterns (the R4 regexes of id, code, date, decimal) and usual idioms.
    '^[^\\s]+(\\s[^\\s]+)*$',
    '^[ \\r\\n\\t\\S]+$',
    '^([0-9]([0-9]([0-9][1-9]|[1-9]0)|[1-9]00)|[1-9]000)(-(0[1-9]|1[0-2])(-(0[1-9]|[1-2][0-9]|3[0-1]))?)?$',
    '^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$',
    '(?:ab|cd)+?',
    'a{02}b{0,01}',
    '^\\w+$',
    '\\d{3}-\\d{2,}',
    '(\\w+)\\s(\\w+)',
  ];
  const inputs = [
    '',
    'abc',
    'abcd',
    'xxxy',
    'xx',
    'aaab',
    'aab',
    '2024-05-01',
    'foo bar',
    'a@b.com',
    'AB\n',
    'a-b.c',
    ' \t x',
    'foobar',
    'bbbac',
    'QUJD ZGVm',
    'a\rb',
    'a\u2028b',
    'axb',
    '\u00a0x\u000b',
    '\b\u0001',
    '\u0000',
    'a/b',
    '1999-12-31',
    '-0.5e10',
    'Ann Lee',
    '123-4567',
    'abcdab',
    'xé',
  ];
  for (const pattern of patterns) {
    it(`/${pattern}/`, () => {
      for (const input of inputs) expect(ours(pattern, input), JSON.stringify(input)).toEqual(theirs(pattern, input));
    });
  }
});

describe('LinearRegex: where RE2 chooses differently from RegExp (documented in linear-regex.ts)', () => {
  it('takes an empty round of a loop that RegExp rejects, so a group can be "" where RegExp has undefined', () => {
    expect(theirs('(a*)*b', 'xb')).toEqual([1, 'b', undefined]);
    expect(ours('(a*)*b', 'xb')).toEqual([1, 'b', '']);
    expect(theirs('(\\b|a){1,2}', 'a')).toEqual([0, 'a', 'a']);
    expect(ours('(\\b|a){1,2}', 'a')).toEqual([0, '', '']);
  });

  it('matches by code point: "." takes a whole surrogate pair', () => {
    expect(theirs('^.$', '😀')).toBeNull();
    expect(ours('^.$', '😀')).toEqual([0, '😀']);
    // A character written as an escaped surrogate pair is still found.
    expect(ours('\\uD83D\\uDE00', 'x😀')).toEqual(theirs('\\uD83D\\uDE00', 'x😀'));
  });
});

describe('LinearRegex: patterns that make a backtracking engine run away', () => {
  // Each takes seconds to hours on RegExp at these lengths; here the charge, re2js's worst case, grows
  // linearly with the input, and re2js answers within it.
  const attacks = ['(a+)+$', '(a|a)*$', '(a*)*$', '(.*a){20}$', '(a|aa)+$', '(\\w+\\s?)+$', '^(a+)+$', '(x+x+)+y'];
  for (const pattern of attacks) {
    it(`/${pattern}/ costs steps linear in the input`, () => {
      const regex = new LinearRegex(pattern);
      const cost = (n: number) => {
        const budget = counting();
        regex.exec('a'.repeat(n) + '!', 0, budget);
        return budget.steps;
      };
      const small = cost(1000);
      const large = cost(4000);
      expect(large).toBeLessThan(small * 4.5);
      const started = performance.now();
      const expected = new RegExp(pattern).test('a'.repeat(12) + '!');
      expect(regex.exec('a'.repeat(100_000) + '!', 0, unlimited) !== null).toBe(expected);
      expect(regex.test('a'.repeat(100_000) + '!', unlimited)).toBe(expected);
      // Linearity is the step count above; this only catches a runaway (hours), with room for a loaded machine.
      expect(performance.now() - started).toBeLessThan(30_000);
      // Short enough for RegExp to answer: the same match (groups can differ, see above: (a*)*$).
      const short = 'a'.repeat(12) + '!';
      expect(ours(pattern, short)?.slice(0, 2)).toEqual(theirs(pattern, short)?.slice(0, 2));
    });
  }

  it('stops when the budget says so', () => {
    const budget = {
      steps: 0,
      spend(n: number) {
        this.steps += n;
        if (this.steps > 100) throw new Error('spent');
      },
    };
    expect(() => new LinearRegex('(a+)+$').exec('a'.repeat(1000), 0, budget)).toThrow('spent');
    // Charged before it runs: a search it cannot afford does not start.
    expect(budget.steps).toBe(1001 * new LinearRegex('(a+)+$').programSize);
  });
});

describe('LinearRegex: refusals', () => {
  it.each([
    ['(a)\\1', /backreferences/],
    ['(?<x>a)\\k<x>', /backreferences/],
    ['a(?=b)', /lookahead/],
    ['(?<!a)b', /lookbehind/],
    ['\\p{L}', /not supported/],
    ['\\Qa\\E', /not supported/],
    ['(?i)a', /invalid group/],
    ['(?s:.)', /invalid group/],
    ['\\u00', /malformed/],
    // re2js's own messages for what JavaScript refuses too.
    ['a**', /invalid nested repetition operator/],
    ['*a', /missing argument to repetition operator/],
    ['(a', /missing closing \)/],
    ['a)', /unexpected \)/],
    ['[a', /missing closing \]/],
    ['a{2000}', /above 1000/],
    // re2js bounds nested counts itself (their product at most 1000); the size bound comes first when larger.
    ['a{2}{3}', /invalid nested repetition operator/],
    ['a{1000}{1000}', new RegExp(`more than ${MAX_PROGRAM_SIZE}`)],
    ['(?:a{10}){200}', /invalid repeat count/],
    ['((a{100}){100}){100}', new RegExp(`more than ${MAX_PROGRAM_SIZE}`)],
    ['(?:abcdefghijk){1000}', new RegExp(`more than ${MAX_PROGRAM_SIZE}`)],
    ['a'.repeat(20_000), new RegExp(`more than ${MAX_PROGRAM_SIZE}`)],
    ['('.repeat(100) + ')'.repeat(100), /nested deeper/],
    ['(a)'.repeat(101), /more than 100 capture groups/],
  ])('refuses /%s/', (pattern, message) => {
    expect(() => new LinearRegex(pattern)).toThrow(UnsupportedPattern);
    expect(() => new LinearRegex(pattern)).toThrow(message);
  });
});

describe('LinearRegex: random patterns', () => {
  const atom = fc.constantFrom('a', 'b', '.', '[ab]', '[^a]', '\\b', '^', '$', '\\w', '\\s', '\\S', '[^\\s]');
  const { node } = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: 'small' },
      atom,
      fc.tuple(tie('node'), tie('node')).map(([x, y]) => `${x as string}${y as string}`),
      fc.tuple(tie('node'), tie('node')).map(([x, y]) => `(?:${x as string}|${y as string})`),
      fc
        .tuple(tie('node'), fc.constantFrom('*', '+', '?', '*?', '+?', '??', '{2}', '{1,2}', '{0,}', '{1,3}?'))
        .map(([x, q]) => `(${x as string})${q}`),
    ),
  }));

  // Whether there is a match, and where the leftmost one starts, are always JavaScript's. Which of the
  // matches starting there is chosen can differ when an optional round of a loop matches the empty string
  // (JavaScript rejects such a round; RE2 does not), e.g. /(\b|a){1,2}/ on "a".
  it('find a match exactly when RegExp does, starting at the same place', () => {
    fc.assert(
      fc.property(node as fc.Arbitrary<string>, fc.stringMatching(/^[ab \r\n\u00a0]{0,8}$/), (pattern, input) => {
        let expected: RegExpExecArray | null;
        try {
          expected = new RegExp(pattern).exec(input);
        } catch {
          return; // not a JavaScript pattern either
        }
        const regex = new LinearRegex(pattern);
        const match = regex.exec(input, 0, unlimited);
        expect(match ? match[0] : null).toBe(expected ? expected.index : null);
        expect(regex.test(input, unlimited)).toBe(expected !== null);
      }),
      { numRuns: 3000 },
    );
  });

  // The bound checked before compiling must hold for every pattern, or a big one could be compiled.
  it('bound from above the program re2js compiles', () => {
    const counted = fc
      .tuple(fc.integer({ min: 0, max: 12 }), fc.integer({ min: 0, max: 12 }), fc.boolean())
      .map(([n, m, open]) => (open ? `{${n},}` : `{${Math.min(n, m)},${Math.max(n, m)}}`));
    const quantifier = fc.oneof(fc.constantFrom('*', '+', '?', '*?', '??', '{3}'), counted);
    const { node } = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        fc.constantFrom('a', '.', '\\s', '[^a-c\\S]', '\\b', '^', '\\d', '(?:)', ''),
        fc.tuple(tie('node'), tie('node')).map(([x, y]) => `${x as string}${y as string}`),
        fc.tuple(tie('node'), tie('node')).map(([x, y]) => `(?:${x as string}|${y as string})`),
        fc
          .tuple(tie('node'), quantifier, fc.boolean())
          .map(([x, q, capture]) => `(${capture ? '' : '?:'}${x as string})${q}`),
      ),
    }));
    fc.assert(
      fc.property(node as fc.Arbitrary<string>, (pattern) => {
        let regex: LinearRegex;
        try {
          regex = new LinearRegex(pattern);
        } catch (error) {
          if (error instanceof UnsupportedPattern) return;
          throw error;
        }
        expect(regex.sizeBound).toBeGreaterThanOrEqual(regex.programSize);
      }),
      { numRuns: 3000 },
    );
  });
});
