// Types of write-ledger.mjs, for the TypeScript suites that use it.
export type Resource = { resourceType: string; id: string; meta?: { versionId?: string }; [key: string]: unknown };
export type Headers = Record<string, string>;

export type InFlight =
  | { kind: 'create'; type: string; identifier: string; sent: Record<string, unknown> }
  | { kind: 'update'; key: string; before: Resource; sent: Record<string, unknown> }
  | { kind: 'transaction'; identifiers: string[]; types: string[] };

export class Ledger {
  constructor(system: string);
  readonly system: string;
  /** `Type/id` → the last acknowledged body, per resource. */
  readonly acked: Map<string, Resource>;
  /** Writes sent but not answered. */
  readonly inFlight: InFlight[];
  /** Patients stored: acknowledged, plus those in flight found whole after a crash. */
  patients: number;
  ack(resource: Resource): void;
}

export interface WriteStats {
  record(op: string, ms: number): void;
  error(op: string, status: number | string, detail: string): void;
}

export interface WriteMix {
  readonly create: number;
  readonly update: number;
  readonly transaction: number;
  readonly search: number;
}

export function writeClient(
  n: number,
  ctx: {
    url: string;
    headers: Headers;
    ledger: Ledger;
    stats: WriteStats;
    until: () => boolean;
    mix: WriteMix;
    random?: () => number;
    beforeWrite?: () => void;
  },
): Promise<void>;

export function sameJson(a: unknown, b: unknown): boolean;
export function verifyAcked(url: string, headers: Headers, ledger: Ledger): Promise<string[]>;
export function verifyInFlight(
  url: string,
  headers: Headers,
  ledger: Ledger,
): Promise<{
  problems: string[];
  outcome: {
    creates: { committed: number; absent: number };
    updates: { old: number; new: number };
    transactions: { committed: number; absent: number };
  };
}>;
export function verifyHistory(url: string, headers: Headers, ledger: Ledger, sample?: number): Promise<string[]>;
export function countByIdentifierSystem(
  url: string,
  headers: Headers,
  system: string,
  type: string,
): Promise<number | string>;
