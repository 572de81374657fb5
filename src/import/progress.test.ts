import { describe, expect, it } from 'vitest';
import { progressReporter } from './progress.js';

const at = (filesDone: number, resources: number) => ({ file: 'f.ndjson', filesDone, filesTotal: 4, resources });

describe('import progress', () => {
  it('prints a line at most every interval when not on a terminal, with count and rate', () => {
    let clock = 0;
    const lines: string[] = [];
    const reporter = progressReporter({ tty: false, everyMs: 5000, now: () => clock, write: (t) => lines.push(t) });
    clock = 1000;
    reporter.update(at(0, 100));
    clock = 5000;
    reporter.update(at(1, 1000));
    clock = 6000;
    reporter.update(at(2, 1200));
    clock = 10_000;
    reporter.update(at(3, 2000));
    reporter.finish();
    expect(lines).toEqual([
      'import: 1/4 files, 1000 resources, 200 resources/s, 5.0 s\n',
      'import: 3/4 files, 2000 resources, 200 resources/s, 10.0 s\n',
    ]);
  });

  it('redraws one bar in place on a terminal and ends its line', () => {
    let clock = 0;
    const out: string[] = [];
    const reporter = progressReporter({ tty: true, everyMs: 5000, now: () => clock, write: (t) => out.push(t) });
    clock = 2000;
    reporter.update(at(2, 500));
    reporter.finish();
    expect(out).toEqual([`\r[${'#'.repeat(15)}${'.'.repeat(15)}] 2/4 files, 500 resources, 250/s `, '\n']);
  });
});
