// What the importer's thread and its validation workers say to each other (validation-pool.ts,
// validation-worker.ts).
import type { ValidationIssue } from '../validation/validate.js';

/** What a worker starts with: the server's FHIR base, for absolute references (undefined: relative ones only). */
export interface ValidationWorkerData {
  readonly baseUrl: string | undefined;
}

/**
 * Lines to validate. With `shared`, the lines are shared with the importer's thread and other workers:
 * each takes a line by setting its slot of `claims` from 0 (compareExchange), the workers from the front
 * (the next index from `front`), the importer's thread from the back, so every line is validated once.
 * A worker sets its `slot` of `entered` before it takes any: one that has not cannot hold a line once
 * the importer's thread finds a line taken, so the importer waits only for those that have.
 */
export interface ValidationRequest {
  readonly id: number;
  readonly texts: readonly string[];
  readonly shared?: {
    readonly claims: Int32Array;
    readonly front: Int32Array;
    readonly entered: Int32Array;
    readonly slot: number;
  };
}

export interface ValidationReply {
  readonly id: number;
  readonly verdicts: { key: string; issues: ValidationIssue[] }[];
}

export const CLAIMED_BY_WORKER = 1;
export const CLAIMED_BY_WRITER = 2;
