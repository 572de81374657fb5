import { expect, it } from 'vitest';
import { sideBySide } from './compare';

it('pairs a changed line with its replacement and keeps the rest on both sides', () => {
  const before = JSON.stringify({ a: 1, b: 'old', c: true }, null, 2);
  const after = JSON.stringify({ a: 1, b: 'new', c: true, d: 4 }, null, 2);
  expect(sideBySide(before, after)).toEqual([
    { left: '{', right: '{', kind: 'same' },
    { left: '  "a": 1,', right: '  "a": 1,', kind: 'same' },
    { left: '  "b": "old",', right: '  "b": "new",', kind: 'changed' },
    { left: '  "c": true', right: '  "c": true,', kind: 'changed' },
    { left: undefined, right: '  "d": 4', kind: 'changed' },
    { left: '}', right: '}', kind: 'same' },
  ]);
});
