// The value parsers shared by the parameter types: dates as ranges, numbers with precision, text
// normalisation, escapes, references and UCUM.
import { describe, expect, it } from 'vitest';
import { MAX_TIME, MIN_TIME, parseDateRange, periodRange } from './dates.js';
import { splitUnescaped, unescapeValue } from './escapes.js';
import { parseDecimal } from './numbers.js';
import { escapeLike, normalizeText, prefixUpperBound } from './text.js';
import { canonicalUnit, toCanonicalValue } from './ucum.js';

const ms = (iso: string) => Date.parse(iso);

describe('dates are ranges', () => {
  it.each([
    ['1980', '1980-01-01T00:00:00Z', '1981-01-01T00:00:00Z'],
    ['1980-02', '1980-02-01T00:00:00Z', '1980-03-01T00:00:00Z'],
    ['1980-12', '1980-12-01T00:00:00Z', '1981-01-01T00:00:00Z'],
    ['2020-02-29', '2020-02-29T00:00:00Z', '2020-03-01T00:00:00Z'],
    ['2020-03-04T10', '2020-03-04T10:00:00Z', '2020-03-04T11:00:00Z'],
    ['2020-03-04T10:30', '2020-03-04T10:30:00Z', '2020-03-04T10:31:00Z'],
    ['2020-03-04T10:30:15Z', '2020-03-04T10:30:15Z', '2020-03-04T10:30:16Z'],
    ['2020-03-04T10:30:15.5Z', '2020-03-04T10:30:15.500Z', '2020-03-04T10:30:15.600Z'],
    ['2020-03-04T10:30:15.123456Z', '2020-03-04T10:30:15.123Z', '2020-03-04T10:30:15.124Z'],
    ['2020-03-04T10:30:15+02:00', '2020-03-04T08:30:15Z', '2020-03-04T08:30:16Z'],
    ['2020-03-04T00:30:00-05:30', '2020-03-04T06:00:00Z', '2020-03-04T06:00:01Z'],
    ['2020-03-04T10:30:15', '2020-03-04T10:30:15Z', '2020-03-04T10:30:16Z'],
  ])('%s → [%s, %s)', (text, lo, hi) => {
    expect(parseDateRange(text)).toEqual({ lo: ms(lo), hi: ms(hi) });
  });

  it.each([
    '',
    '20',
    '2020-13',
    '2020-02-30',
    '2021-02-29',
    '2020-01-01T25:00',
    '2020-01-01T10:61',
    'soon',
    '2020-01-01T10:00+15:00',
  ])('refuses %j', (text) => {
    expect(parseDateRange(text)).toBeUndefined();
  });

  it('treats an open Period end as the far future and an open start as the far past', () => {
    expect(periodRange({ start: '2020' })).toEqual({ lo: ms('2020-01-01T00:00:00Z'), hi: MAX_TIME });
    expect(periodRange({ end: '2020' })).toEqual({ lo: MIN_TIME, hi: ms('2021-01-01T00:00:00Z') });
    expect(periodRange({})).toBeUndefined();
  });
});

describe('numbers carry their precision', () => {
  it.each([
    ['100', 100, 0.5],
    ['100.0', 100, 0.05],
    ['0.25', 0.25, 0.005],
    ['1e2', 100, 50],
    ['1.5e2', 150, 5],
    ['-3', -3, 0.5],
  ])('%s', (text, value, half) => {
    const parsed = parseDecimal(text)!;
    expect(parsed.value).toBe(value);
    expect(parsed.half).toBeCloseTo(half, 12);
  });
  it.each(['', 'abc', '1,5', '1e', '--1', 'Infinity', 'NaN', '0x10'])('refuses %j', (text) => {
    expect(parseDecimal(text)).toBeUndefined();
  });
});

describe('text', () => {
  it('folds case and accents, and spaces', () => {
    expect(normalizeText('  Chloé  ZOË ')).toBe('chloe zoe');
    expect(normalizeText('Müller-Straße')).toBe('muller-strasse'.replace('ss', 'ß'));
    expect(normalizeText('Ångström ﬁne')).toBe('angstrom fine');
    expect(normalizeText('São Paulo')).toBe('sao paulo');
  });
  it('normalises plain ASCII texts as the general path does', () => {
    const general = (v: string) => v.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase().trim().replace(/\s+/g, ' ');
    const samples = [
      'Smith',
      'SMITH  Jr',
      ' leading',
      'trailing ',
      'tab\there',
      'a\nb',
      'Code-123_x',
      '',
      ' ',
      "O'Brien",
    ];
    for (const ascii of [...samples, String.fromCharCode(...Array.from({ length: 95 }, (_, i) => 32 + i))])
      expect(normalizeText(ascii)).toBe(general(ascii));
  });
  it('computes the upper bound of a prefix range, and escapes LIKE', () => {
    expect(prefixUpperBound('smi')).toBe('smj');
    expect(prefixUpperBound('az')).toBe('a{');
    expect(escapeLike('100%_\\')).toBe('100\\%\\_\\\\');
  });
});

describe('escapes', () => {
  it('splits on unescaped separators only', () => {
    expect(splitUnescaped('a,b\\,c,,d', ',')).toEqual(['a', 'b\\,c', '', 'd']);
    expect(splitUnescaped('s|v\\|w', '|').map(unescapeValue)).toEqual(['s', 'v|w']);
    expect(splitUnescaped('a$b\\$c', '$').map(unescapeValue)).toEqual(['a', 'b$c']);
    expect(unescapeValue('a\\\\b')).toBe('a\\b');
  });
});

describe('UCUM canonical units', () => {
  it('converts to base units, including affine temperatures', () => {
    const minute = canonicalUnit('min')!;
    const day = canonicalUnit('d')!;
    expect(minute.code).toBe('s');
    expect(toCanonicalValue(4320, minute)).toBe(toCanonicalValue(3, day));
    expect(canonicalUnit('mg')!.code).toBe('g');
    expect(toCanonicalValue(37, canonicalUnit('Cel')!)).toBeCloseTo(310.15, 9);
    expect(toCanonicalValue(98.6, canonicalUnit('[degF]')!)).toBeCloseTo(310.15, 9);
    expect(canonicalUnit('kg/m2')!.code).toBe('g.m-2');
    expect(canonicalUnit('not-a-unit')).toBeUndefined();
  });
});
