// Scribe records: the one place that reads and writes `scribe_record` and `scribe_audio`. A record is
// created together with its job (one transaction, so no record is ever without a job); the job processor
// completes or fails it, again together with its job (queue.ts); a retry puts a FAILED record and its job
// back in progress, again in one transaction.
import type { SqlDatabase, SqlExecutor } from '../storage/sql/database.js';
import type { AudioInput, NoteSection } from './engines/engine.js';
import type { Submission } from './input.js';
import { enqueueJob, requeueFailedJob } from './queue.js';

export type ScribeStatus = 'IN_PROGRESS' | 'COMPLETED' | 'FAILED';

export interface ScribeNote {
  readonly templateId: number;
  readonly templateName: string;
  readonly sections: readonly NoteSection[];
  /** `DocumentReference/<id>`: where the note was filed. */
  readonly documentReference: string;
}

export interface ScribeRecord {
  readonly id: number;
  readonly accountId: string;
  readonly status: ScribeStatus;
  readonly submittedAt: string;
  readonly completedAt: string | null;
  readonly patientName: string | null;
  readonly dateOfService: string | null;
  readonly additionalContext: Record<string, unknown> | null;
  readonly patient: string | null;
  readonly encounter: string | null;
  readonly templateIds: readonly number[];
  readonly transcripts: readonly string[];
  readonly notes: readonly ScribeNote[];
  readonly error: string | null;
}

interface RecordRow {
  id: number;
  account_id: string;
  status: ScribeStatus;
  submitted_at: string;
  completed_at: string | null;
  patient_name: string | null;
  date_of_service: string | null;
  additional_context: string | null;
  patient: string | null;
  encounter: string | null;
  template_ids: string;
  transcripts: string;
  notes: string | null;
  error: string | null;
}

const COLUMNS =
  'id, account_id, status, submitted_at, completed_at, patient_name, date_of_service, additional_context, patient, encounter, template_ids, transcripts, notes, error';

function fromRow(row: RecordRow): ScribeRecord {
  return {
    id: Number(row.id),
    accountId: row.account_id,
    status: row.status,
    submittedAt: row.submitted_at,
    completedAt: row.completed_at,
    patientName: row.patient_name,
    dateOfService: row.date_of_service,
    additionalContext:
      row.additional_context === null ? null : (JSON.parse(row.additional_context) as Record<string, unknown>),
    patient: row.patient,
    encounter: row.encounter,
    templateIds: JSON.parse(row.template_ids) as number[],
    transcripts: JSON.parse(row.transcripts) as string[],
    notes: row.notes === null ? [] : (JSON.parse(row.notes) as ScribeNote[]),
    error: row.error,
  };
}

/** A record as the API answers it (docs/api.md "Scribe"). */
export function recordJson(record: ScribeRecord): Record<string, unknown> {
  return {
    scribe_id: record.id,
    status: record.status,
    submitted_at: record.submittedAt,
    completed_at: record.completedAt,
    patient_name: record.patientName,
    date_of_service: record.dateOfService,
    additional_context: record.additionalContext,
    patient: record.patient,
    encounter: record.encounter,
    template_ids: record.templateIds,
    transcripts: record.transcripts,
    notes: record.notes.map((note) => ({
      template_id: note.templateId,
      template_name: note.templateName,
      sections: note.sections.map((s) => ({ title: s.title, text: s.text })),
      document_reference: note.documentReference,
    })),
    error: record.error,
  };
}

export type RetryOutcome =
  | { readonly outcome: 'retried'; readonly record: ScribeRecord }
  | { readonly outcome: 'not-failed'; readonly status: ScribeStatus }
  | { readonly outcome: 'not-found' };

export interface RecordPage {
  readonly records: ScribeRecord[];
  /** The id the next (older) page starts below, when there is one. */
  readonly nextBefore?: number;
}

/** The byte budget of one list page: items are added while the page stays within it (at least one). */
export const LIST_PAGE_BYTES = 4 * 1024 * 1024;

// About the bytes a record takes in a list page: its stored JSON and text columns, read without loading
// them (octet_length, on both databases, comes from the value's header), plus the keys around them.
const RECORD_BYTES = `(400 + octet_length(transcripts) + octet_length(template_ids) + ${[
  'notes',
  'additional_context',
  'error',
  'patient_name',
  'patient',
  'encounter',
]
  .map((column) => `COALESCE(octet_length(${column}), 0)`)
  .join(' + ')})`;

export class ScribeRecords {
  constructor(
    private readonly db: SqlDatabase,
    private readonly clock: () => Date = () => new Date(),
    /** LIST_PAGE_BYTES unless a test wants small pages. */
    private readonly listPageBytes: number = LIST_PAGE_BYTES,
  ) {}

  /** Stores a new IN_PROGRESS record, its audio and its job, in one transaction. */
  async submit(accountId: string, submission: Submission): Promise<ScribeRecord> {
    const now = this.clock();
    return this.db.transaction(async (tx) => {
      const [row] = await tx.query<RecordRow>(
        `INSERT INTO scribe_record (account_id, status, submitted_at, patient_name, date_of_service, additional_context,
           patient, encounter, template_ids, transcripts)
         VALUES (?, 'IN_PROGRESS', ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [
          accountId,
          now.toISOString(),
          submission.patientName ?? null,
          submission.dateOfService ?? null,
          submission.additionalContext === undefined ? null : JSON.stringify(submission.additionalContext),
          submission.patient ?? null,
          submission.encounter ?? null,
          JSON.stringify(submission.templateIds),
          JSON.stringify(submission.transcripts),
        ],
      );
      const record = fromRow(row);
      for (const [position, file] of submission.audio.entries()) {
        await tx.execute(
          'INSERT INTO scribe_audio (record_id, position, filename, content_type, data) VALUES (?, ?, ?, ?, ?)',
          [record.id, position, file.filename, file.contentType, file.data.toString('base64')],
        );
      }
      await enqueueJob(tx, record.id, now.getTime());
      return record;
    });
  }

  /** Any record, for the job processor. */
  async get(id: number): Promise<ScribeRecord | undefined> {
    if (!Number.isSafeInteger(id)) return undefined;
    const [row] = await this.db.query<RecordRow>(`SELECT ${COLUMNS} FROM scribe_record WHERE id = ?`, [id]);
    return row ? fromRow(row) : undefined;
  }

  /** A record of this account; another account's record is as absent as one that never existed. */
  async getOwned(id: number, accountId: string): Promise<ScribeRecord | undefined> {
    if (!Number.isSafeInteger(id)) return undefined;
    const [row] = await this.db.query<RecordRow>(
      `SELECT ${COLUMNS} FROM scribe_record WHERE id = ? AND account_id = ?`,
      [id, accountId],
    );
    return row ? fromRow(row) : undefined;
  }

  /**
   * The account's records, newest (highest id) first, strictly below `before` when given: at most `limit`, and
   * no more than fit in the page's byte budget (at least one). The sizes are read first and only the records
   * that fit are loaded, so a page of large transcripts never holds more than the budget (or one record).
   */
  async list(accountId: string, limit: number, before?: number): Promise<RecordPage> {
    const sizes = await this.db.query<{ id: number | string; bytes: number | string }>(
      `SELECT id, ${RECORD_BYTES} AS bytes FROM scribe_record WHERE account_id = ?${before === undefined ? '' : ' AND id < ?'}
        ORDER BY id DESC LIMIT ?`,
      before === undefined ? [accountId, limit + 1] : [accountId, before, limit + 1],
    );
    const chosen: number[] = [];
    let total = 0;
    for (const row of sizes.slice(0, limit)) {
      const bytes = Number(row.bytes);
      if (chosen.length > 0 && total + bytes > this.listPageBytes) break;
      chosen.push(Number(row.id));
      total += bytes;
    }
    if (chosen.length === 0) return { records: [] };
    const rows = await this.db.query<RecordRow>(
      `SELECT ${COLUMNS} FROM scribe_record WHERE account_id = ? AND id IN (${chosen.map(() => '?').join(', ')})
        ORDER BY id DESC`,
      [accountId, ...chosen],
    );
    return {
      records: rows.map(fromRow),
      nextBefore: sizes.length > chosen.length ? chosen[chosen.length - 1] : undefined,
    };
  }

  /**
   * Puts a FAILED record of this account back IN_PROGRESS (its error and completed_at cleared) and queues its
   * job again, in one transaction. One conditional UPDATE decides: of two concurrent retries exactly one
   * changes the row (PostgreSQL re-checks the WHERE after waiting for the other's update, SQLite serialises
   * writers), so the other sees the record IN_PROGRESS. Another account's record is as absent as one that
   * never existed.
   */
  async retry(id: number, accountId: string): Promise<RetryOutcome> {
    if (!Number.isSafeInteger(id)) return { outcome: 'not-found' };
    const now = this.clock();
    return this.db.transaction(async (tx): Promise<RetryOutcome> => {
      const [row] = await tx.query<RecordRow>(
        `UPDATE scribe_record SET status = 'IN_PROGRESS', completed_at = NULL, error = NULL
          WHERE id = ? AND account_id = ? AND status = 'FAILED' RETURNING ${COLUMNS}`,
        [id, accountId],
      );
      if (!row) {
        const [current] = await tx.query<{ status: ScribeStatus }>(
          'SELECT status FROM scribe_record WHERE id = ? AND account_id = ?',
          [id, accountId],
        );
        return current ? { outcome: 'not-failed', status: current.status } : { outcome: 'not-found' };
      }
      await requeueFailedJob(tx, id, now.getTime());
      return { outcome: 'retried', record: fromRow(row) };
    });
  }

  /** Deletes the record's audio once its transcripts are saved in the job's progress. */
  async dropAudio(recordId: number): Promise<void> {
    await this.db.execute('DELETE FROM scribe_audio WHERE record_id = ?', [recordId]);
  }

  /** The record's audio files, in upload order (none once they have been transcribed). */
  async audio(recordId: number): Promise<AudioInput[]> {
    const rows = await this.db.query<{ filename: string; content_type: string; data: string }>(
      'SELECT filename, content_type, data FROM scribe_audio WHERE record_id = ? ORDER BY position',
      [recordId],
    );
    return rows.map((r) => ({
      filename: r.filename,
      contentType: r.content_type,
      data: Buffer.from(r.data, 'base64'),
    }));
  }
}

/** Inside the job's completing transaction: the notes, the transcripts (with those of the audio), done. */
export async function markCompleted(
  tx: SqlExecutor,
  recordId: number,
  result: { transcripts: readonly string[]; notes: readonly ScribeNote[]; completedAt: string },
): Promise<void> {
  await tx.execute(
    `UPDATE scribe_record SET status = 'COMPLETED', completed_at = ?, transcripts = ?, notes = ?, error = NULL WHERE id = ?`,
    [result.completedAt, JSON.stringify(result.transcripts), JSON.stringify(result.notes), recordId],
  );
  await tx.execute('DELETE FROM scribe_audio WHERE record_id = ?', [recordId]);
}

/**
 * Inside the job's failing transaction: FAILED with the reason. Audio not yet transcribed is kept, so that a
 * retry can transcribe it (transcribed audio was deleted when its transcripts were saved).
 */
export async function markFailed(tx: SqlExecutor, recordId: number, error: string, failedAt: string): Promise<void> {
  await tx.execute(`UPDATE scribe_record SET status = 'FAILED', completed_at = ?, error = ? WHERE id = ?`, [
    failedAt,
    error,
    recordId,
  ]);
}
