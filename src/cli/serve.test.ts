import { describe, expect, it } from 'vitest';
import { parseServeArguments } from './serve.js';

describe('serve arguments', () => {
  it('takes --workers N in both spellings, or nothing', () => {
    expect(parseServeArguments([])).toEqual({});
    expect(parseServeArguments(['--workers', '3'])).toEqual({ workers: 3 });
    expect(parseServeArguments(['--workers=2'])).toEqual({ workers: 2 });
  });

  it('names what is wrong with anything else', () => {
    expect(parseServeArguments(['--workers'])).toBe('--workers takes a number of processes from 1 to 64, got ""');
    expect(parseServeArguments(['--workers', '0'])).toBe('--workers takes a number of processes from 1 to 64, got "0"');
    expect(parseServeArguments(['--workers', '65'])).toBe(
      '--workers takes a number of processes from 1 to 64, got "65"',
    );
    expect(parseServeArguments(['--workers', '1e1'])).toBe(
      '--workers takes a number of processes from 1 to 64, got "1e1"',
    );
    expect(parseServeArguments(['--port', '80'])).toBe('serve takes only --workers N, got "--port 80"');
    expect(parseServeArguments(['--workers', '2', 'extra'])).toBe(
      'serve takes only --workers N, got "--workers 2 extra"',
    );
  });
});
