// A scribe submission, checked: JSON bodies and forms (multipart or URL-encoded, with repeated fields) are
// turned into one list of values per field, then every field is checked and every problem named at once
// (`400 invalid_request`, "transcripts: ...; template_ids: ..."). Pure: what needs the database (do the
// templates and the referenced resources exist?) is checked by the route afterwards.
import { AppError } from '../errors.js';
import type { AudioInput } from './engines/engine.js';
import { ID } from '../fhir/ids.js';

export interface Submission {
  readonly transcripts: readonly string[];
  readonly templateIds: readonly number[];
  readonly patientName?: string;
  readonly dateOfService?: string;
  readonly additionalContext?: Record<string, unknown>;
  /** `Patient/<id>` */
  readonly patient?: string;
  /** `Encounter/<id>` */
  readonly encounter?: string;
  readonly audio: readonly AudioInput[];
}

export const SUBMISSION_LIMITS = {
  transcripts: 100,
  templateIds: 20,
  patientName: 200,
  additionalContextBytes: 64 * 1024,
  additionalContextDepth: 32,
  audioFiles: 10,
} as const;

export const FIELDS = [
  'transcripts',
  'template_ids',
  'patient_name',
  'date_of_service',
  'additional_context',
  'patient',
  'encounter',
  'audio_files',
] as const;

const SINGLE_FIELDS = new Set(['patient_name', 'date_of_service', 'additional_context', 'patient', 'encounter']);

/** A form field name as clients write it: `template_ids[]` (PHP/Rails style) is `template_ids`. */
export function fieldName(name: string): string {
  return name.endsWith('[]') ? name.slice(0, -2) : name;
}

/** The values of each field, in order; a repeated form field or a JSON array gives several. */
export type FieldValues = Map<string, unknown[]>;

/** A JSON body's fields: an array value is the field's list of values. */
export function fieldsFromJson(body: unknown): FieldValues {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new AppError(
      'bad-request',
      'The request body must be a JSON object with the fields transcripts, template_ids, ...',
    );
  }
  const fields: FieldValues = new Map();
  for (const [name, value] of Object.entries(body as Record<string, unknown>)) {
    if (value === null || value === undefined) continue;
    fields.set(name, Array.isArray(value) && name !== 'additional_context' ? value : [value]);
  }
  return fields;
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T([01]\d|2[0-3]):([0-5]\d)(:([0-5]\d)(\.\d{1,9})?)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$/;
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

function validCalendarDate(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** `YYYY-MM-DD`, or an RFC 3339 date-time with its offset (FHIR needs the zone once there is a time). */
export function dateOfServiceProblem(value: string): string | undefined {
  const date = DATE.exec(value) ?? DATE_TIME.exec(value);
  if (!date) {
    if (/^\d{4}-\d{2}-\d{2}T[\d:.]+$/.test(value)) {
      return `"${value}" has a time but no time zone: add Z or an offset such as +02:00`;
    }
    return `"${value}" is neither a date (YYYY-MM-DD) nor a date-time (e.g. 2024-05-01T09:30:00Z)`;
  }
  if (!validCalendarDate(Number(date[1]), Number(date[2]), Number(date[3]))) return `"${value}" is not a calendar date`;
  return undefined;
}

function depth(value: unknown, level = 1): number {
  if (value === null || typeof value !== 'object') return level - 1;
  let deepest = level;
  for (const child of Object.values(value)) deepest = Math.max(deepest, depth(child, level + 1));
  return deepest;
}

/**
 * Checks every field; throws one AppError('bad-request') naming each problem. `audio` are the form's files
 * (none for JSON); `sttAvailable` says whether the server can transcribe them.
 */
export function parseSubmission(fields: FieldValues, audio: readonly AudioInput[], sttAvailable: boolean): Submission {
  const problems: string[] = [];
  checkFieldNames(fields, problems);
  const transcripts = readTranscripts(fields, problems);
  checkAudio(fields, audio, sttAvailable, problems);
  const templateIds = readTemplateIds(fields, problems);
  const patientName = readPatientName(fields, problems);
  const dateOfService = singleField(fields, 'date_of_service', problems);
  const dateProblem = dateOfService === undefined ? undefined : dateOfServiceProblem(dateOfService);
  if (dateProblem) problems.push(`date_of_service: ${dateProblem}`);
  const additionalContext = readAdditionalContext(fields, problems);
  const patient = readReference(fields, 'patient', 'Patient', problems);
  const encounter = readReference(fields, 'encounter', 'Encounter', problems);

  if (problems.length > 0) throw new AppError('bad-request', `Invalid scribe request: ${problems.join('; ')}`);
  if (audio.length > 0 && !sttAvailable) {
    throw new AppError(
      'speech-to-text-unavailable',
      'audio_files: this server has no speech-to-text engine (AMBIENT_STT_URL is not set); send transcripts instead',
    );
  }
  return { transcripts, templateIds, patientName, dateOfService, additionalContext, patient, encounter, audio };
}

/** Only the known fields, each single one once. */
function checkFieldNames(fields: FieldValues, problems: string[]): void {
  const unknown = [...fields.keys()].filter((name) => !(FIELDS as readonly string[]).includes(name));
  if (unknown.length > 0) {
    problems.push(
      `${unknown.map((n) => JSON.stringify(n)).join(', ')}: unknown field${unknown.length > 1 ? 's' : ''} (the fields are ${FIELDS.join(', ')})`,
    );
  }
  for (const name of SINGLE_FIELDS) {
    if ((fields.get(name)?.length ?? 0) > 1)
      problems.push(`${name}: give it once, not ${fields.get(name)!.length} times`);
  }
}

/** A single optional string field; "" counts as absent (HTML forms send empty fields). */
function singleField(fields: FieldValues, name: string, problems: string[]): string | undefined {
  const value = fields.get(name)?.[0];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') {
    problems.push(`${name}: must be a string`);
    return undefined;
  }
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

/** transcripts: one or more non-empty strings (or none, when audio files are sent). */
function readTranscripts(fields: FieldValues, problems: string[]): string[] {
  const transcripts: string[] = [];
  const rawTranscripts = fields.get('transcripts') ?? [];
  rawTranscripts.forEach((value, i) => {
    const at = rawTranscripts.length > 1 ? `transcripts[${i}]` : 'transcripts';
    if (typeof value !== 'string') problems.push(`${at}: must be a string`);
    else if (value.trim() === '') problems.push(`${at}: must not be empty`);
    else transcripts.push(value.replace(/\r\n/g, '\n').trim());
  });
  if (rawTranscripts.length > SUBMISSION_LIMITS.transcripts) {
    problems.push(`transcripts: at most ${SUBMISSION_LIMITS.transcripts} transcripts per record`);
  }
  return transcripts;
}

/** audio_files: only as form file parts, only with a speech-to-text engine; transcripts or audio required. */
function checkAudio(fields: FieldValues, audio: readonly AudioInput[], sttAvailable: boolean, problems: string[]) {
  if (fields.has('audio_files')) {
    problems.push('audio_files: send audio as multipart/form-data file parts named audio_files');
  }
  if (audio.length > SUBMISSION_LIMITS.audioFiles) {
    problems.push(`audio_files: at most ${SUBMISSION_LIMITS.audioFiles} files per record`);
  }
  audio.forEach((file, i) => {
    if (file.data.length === 0) problems.push(`audio_files[${i}] (${file.filename}): the file is empty`);
  });
  if ((fields.get('transcripts') ?? []).length === 0 && audio.length === 0 && !fields.has('audio_files')) {
    problems.push(
      sttAvailable
        ? 'transcripts: required (one or more transcripts, or audio_files)'
        : 'transcripts: required (one or more transcripts)',
    );
  }
}

/** template_ids: one or more positive integers, each once; "1,2" in one form field is two. */
function readTemplateIds(fields: FieldValues, problems: string[]): number[] {
  const templateIds: number[] = [];
  const rawIds = fields.get('template_ids') ?? [];
  const tokens: unknown[] = rawIds.flatMap((value) =>
    typeof value === 'string' && value.includes(',') ? value.split(',') : [value],
  );
  for (const value of tokens) {
    const id =
      typeof value === 'number' ? value : typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(id) || id < 1) {
      problems.push(`template_ids: ${JSON.stringify(value)} is not a template id (a positive integer)`);
    } else if (templateIds.includes(id)) {
      problems.push(`template_ids: ${id} is listed twice`);
    } else {
      templateIds.push(id);
    }
  }
  if (rawIds.length === 0) problems.push('template_ids: required (one or more template ids, e.g. 1 for a SOAP note)');
  if (templateIds.length > SUBMISSION_LIMITS.templateIds) {
    problems.push(`template_ids: at most ${SUBMISSION_LIMITS.templateIds} templates per record`);
  }
  return templateIds;
}

function readPatientName(fields: FieldValues, problems: string[]): string | undefined {
  const patientName = singleField(fields, 'patient_name', problems);
  if (patientName !== undefined && patientName.length > SUBMISSION_LIMITS.patientName) {
    problems.push(`patient_name: at most ${SUBMISSION_LIMITS.patientName} characters`);
  }
  if (patientName !== undefined && CONTROL_CHARACTERS.test(patientName)) {
    problems.push('patient_name: must not contain control characters');
  }
  return patientName;
}

/** additional_context: a JSON object, or a string holding one. */
function readAdditionalContext(fields: FieldValues, problems: string[]): Record<string, unknown> | undefined {
  const rawContext = fields.get('additional_context')?.[0];
  if (rawContext === undefined) return undefined;
  let value: unknown = rawContext;
  if (typeof rawContext === 'string') {
    if (rawContext.trim() === '') return undefined;
    try {
      value = JSON.parse(rawContext);
    } catch (error) {
      problems.push(`additional_context: not valid JSON (${(error as Error).message})`);
      return undefined;
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    problems.push('additional_context: must be a JSON object (or a string holding one)');
  } else if (Buffer.byteLength(JSON.stringify(value)) > SUBMISSION_LIMITS.additionalContextBytes) {
    problems.push(`additional_context: at most ${SUBMISSION_LIMITS.additionalContextBytes} bytes of JSON`);
  } else if (depth(value) > SUBMISSION_LIMITS.additionalContextDepth) {
    problems.push(`additional_context: nested deeper than ${SUBMISSION_LIMITS.additionalContextDepth} levels`);
  } else {
    return value as Record<string, unknown>;
  }
  return undefined;
}

/** patient, encounter: `Type/<id>`. */
function readReference(
  fields: FieldValues,
  name: 'patient' | 'encounter',
  type: string,
  problems: string[],
): string | undefined {
  const value = singleField(fields, name, problems);
  if (value === undefined) return undefined;
  if (!new RegExp(`^${type}/${ID}$`).test(value)) {
    problems.push(
      `${name}: must be a reference of the form "${type}/<id>", got ${JSON.stringify(value.slice(0, 100))}`,
    );
    return undefined;
  }
  return value;
}
