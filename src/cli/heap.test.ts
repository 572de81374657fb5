import { describe, expect, it } from 'vitest';
import { heapGrowthChosen } from './heap.js';

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
