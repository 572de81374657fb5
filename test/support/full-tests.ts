// The size of the long suites: quick in `npm test`, heavy with AMBIENT_FULL_TESTS=1, which
// `npm run test:full` sets (CI runs both; docs/testing.md says what each runs).

export const FULL = Boolean(process.env.AMBIENT_FULL_TESTS);

/** fast-check run count: `quick` in `npm test`, `full` in `npm run test:full`. */
export function runs(quick: number, full: number): { numRuns: number } {
  return { numRuns: FULL ? full : quick };
}
