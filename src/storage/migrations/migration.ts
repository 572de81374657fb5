import type { Dialect } from '../sql/dialect.js';

/** A versioned schema change. Versions are applied in order, once, and never edited after they ship. */
export interface Migration {
  readonly version: number;
  readonly name: string;
  /** The statements, one per array element, for the given dialect. */
  statements(dialect: Dialect): string[];
}
