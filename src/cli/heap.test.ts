import { describe, expect, it } from 'vitest';
import { cappedCommandLine, heapGrowthChosen, MAX_SEMI_SPACE_MB, youngGenerationChosen } from './heap.js';

describe('heapGrowthChosen', () => {
  it("sees the operator's flag in either spelling", () => {
    expect(heapGrowthChosen(['--heap-growing-percent=50'])).toBe(true);
    expect(heapGrowthChosen(['--enable-source-maps', '--heap_growing_percent=30'])).toBe(true);
  });

  it('leaves the growth to the server otherwise', () => {
    expect(heapGrowthChosen([])).toBe(false);
    expect(heapGrowthChosen(['--max-old-space-size=512', '--enable-source-maps'])).toBe(false);
  });
});

describe('youngGenerationChosen', () => {
  it('sees a semi-space flag on the command line or in NODE_OPTIONS, in either spelling', () => {
    expect(youngGenerationChosen(['--max-semi-space-size=16'])).toBe(true);
    expect(youngGenerationChosen(['--import', 'tsx'], '--enable-source-maps --min_semi_space_size=2')).toBe(true);
  });

  it('leaves the cap to the server otherwise', () => {
    expect(youngGenerationChosen(['--max-old-space-size=512'], '--enable-source-maps')).toBe(false);
    expect(youngGenerationChosen([], undefined)).toBe(false);
  });
});

describe('cappedCommandLine', () => {
  it('puts the cap before the node flags and keeps the script and its arguments', () => {
    expect(cappedCommandLine('/usr/bin/node', ['--import', 'tsx'], ['/usr/bin/node', 'src/main.ts', 'serve'])).toEqual([
      '/usr/bin/node',
      `--max-semi-space-size=${MAX_SEMI_SPACE_MB}`,
      '--import',
      'tsx',
      'src/main.ts',
      'serve',
    ]);
  });
});
