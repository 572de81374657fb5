// Read-your-writes on PostgreSQL replicas (DATABASE_READ_URLS): after a write request the account's
// position in the write-ahead log is recorded on the primary; a later search of that account goes to a
// replica only once the replica has replayed that far (postgres/replicas.ts), so a client always sees
// its own writes, through any server process. Accounts that never wrote read from any healthy replica.
import type { SqlDatabase } from './sql/database.js';

export class WritePositions {
  constructor(private readonly db: SqlDatabase) {}

  /**
   * Records the primary's position now, after the account's write committed. Two requests of one account
   * may record out of order: the later position stays.
   */
  async record(accountId: string): Promise<void> {
    const position = this.db.dialect.writePosition;
    if (position === undefined) return;
    await this.db.execute(
      `INSERT INTO account_write_position (account_id, position) VALUES (?, ${position.now})
       ON CONFLICT (account_id) DO UPDATE SET position = ${position.later('account_write_position.position', 'excluded.position')}`,
      [accountId],
    );
  }

  /** The position after the account's latest write, or undefined when it never wrote (or none is tracked). */
  async of(accountId: string): Promise<string | undefined> {
    if (this.db.dialect.writePosition === undefined) return undefined;
    const [row] = await this.db.query<{ position: string }>(
      'SELECT position FROM account_write_position WHERE account_id = ?',
      [accountId],
    );
    return row?.position;
  }
}

/**
 * The primary's position now, or undefined where none is tracked: what a replica must have replayed to
 * see everything committed so far (an export's snapshot, export/runner.ts).
 */
export async function currentWritePosition(db: SqlDatabase): Promise<string | undefined> {
  const position = db.dialect.writePosition;
  if (position === undefined) return undefined;
  const [row] = await db.query<{ position: string }>(`SELECT ${position.now} AS position`);
  return row?.position;
}

/** A PostgreSQL WAL position (`16/B374D848`) as a number, to compare two of them; undefined when malformed. */
export function walPosition(text: string): bigint | undefined {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!match) return undefined;
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}
