import { describe, expect, it } from 'vitest';
import { AppError } from '../errors.js';
import { dateOfServiceProblem, fieldsFromJson, parseSubmission } from './input.js';
import type { FieldValues } from './input.js';

const json = (body: Record<string, unknown>, stt = false) => parseSubmission(fieldsFromJson(body), [], stt);
const form = (pairs: [string, string][]) => {
  const fields: FieldValues = new Map();
  for (const [name, value] of pairs) fields.set(name, [...(fields.get(name) ?? []), value]);
  return parseSubmission(fields, [], false);
};

function refusal(fn: () => unknown): AppError {
  try {
    fn();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

describe('parseSubmission', () => {
  it('accepts the full JSON form', () => {
    expect(
      json({
        transcripts: ['Doctor: Hi.', 'Patient: Hello.'],
        template_ids: [1, 2],
        patient_name: ' Jane Doe ',
        date_of_service: '2024-05-01T09:30:00+02:00',
        additional_context: { visit: 'follow-up' },
        patient: 'Patient/p-1',
        encounter: 'Encounter/e.1',
      }),
    ).toEqual({
      transcripts: ['Doctor: Hi.', 'Patient: Hello.'],
      templateIds: [1, 2],
      patientName: 'Jane Doe',
      dateOfService: '2024-05-01T09:30:00+02:00',
      additionalContext: { visit: 'follow-up' },
      patient: 'Patient/p-1',
      encounter: 'Encounter/e.1',
      audio: [],
    });
  });

  it('accepts single values for list fields, numeric strings and additional_context as a JSON string', () => {
    const parsed = json({ transcripts: 'One.', template_ids: '2', additional_context: '{"a": [1]}' });
    expect(parsed.transcripts).toEqual(['One.']);
    expect(parsed.templateIds).toEqual([2]);
    expect(parsed.additionalContext).toEqual({ a: [1] });
  });

  it('reads forms: repeated fields, "1,2" lists, empty optional fields as absent', () => {
    const parsed = form([
      ['transcripts', 'First.'],
      ['transcripts', 'Second.'],
      ['template_ids', '1,2'],
      ['template_ids', '3'],
      ['patient_name', ''],
      ['additional_context', ''],
    ]);
    expect(parsed.transcripts).toEqual(['First.', 'Second.']);
    expect(parsed.templateIds).toEqual([1, 2, 3]);
    expect(parsed.patientName).toBeUndefined();
    expect(parsed.additionalContext).toBeUndefined();
  });

  it.each([
    [{ template_ids: [1] }, 'transcripts: required'],
    [{ transcripts: [], template_ids: [1] }, 'transcripts: required'],
    [{ transcripts: ['  '], template_ids: [1] }, 'transcripts: must not be empty'],
    [{ transcripts: ['a', 3], template_ids: [1] }, 'transcripts[1]: must be a string'],
    [{ transcripts: ['a'] }, 'template_ids: required'],
    [{ transcripts: ['a'], template_ids: ['x'] }, 'template_ids: "x" is not a template id'],
    [{ transcripts: ['a'], template_ids: [1.5] }, 'template_ids: 1.5 is not a template id'],
    [{ transcripts: ['a'], template_ids: [0] }, 'template_ids: 0 is not a template id'],
    [{ transcripts: ['a'], template_ids: [1, 1] }, 'template_ids: 1 is listed twice'],
    [{ transcripts: ['a'], template_ids: [1], patient_name: 7 }, 'patient_name: must be a string'],
    [
      { transcripts: ['a'], template_ids: [1], date_of_service: '05/01/2024' },
      'date_of_service: "05/01/2024" is neither',
    ],
    [{ transcripts: ['a'], template_ids: [1], date_of_service: '2024-05-01T09:30:00' }, 'has a time but no time zone'],
    [{ transcripts: ['a'], template_ids: [1], date_of_service: '2024-02-30' }, 'is not a calendar date'],
    [{ transcripts: ['a'], template_ids: [1], additional_context: '{not json' }, 'additional_context: not valid JSON'],
    [{ transcripts: ['a'], template_ids: [1], additional_context: '[1]' }, 'additional_context: must be a JSON object'],
    [{ transcripts: ['a'], template_ids: [1], additional_context: 5 }, 'additional_context: must be a JSON object'],
    [
      { transcripts: ['a'], template_ids: [1], patient: 'Encounter/1' },
      'patient: must be a reference of the form "Patient/<id>"',
    ],
    [{ transcripts: ['a'], template_ids: [1], patient: 'Patient/a b' }, 'patient: must be a reference'],
    [
      { transcripts: ['a'], template_ids: [1], encounter: 'Patient/1' },
      'encounter: must be a reference of the form "Encounter/<id>"',
    ],
    [{ transcripts: ['a'], template_ids: [1], template_id: 1 }, '"template_id": unknown field'],
    [{ transcripts: ['a'], template_ids: [1], audio_files: 'x' }, 'audio_files: send audio as multipart/form-data'],
    [{ transcripts: ['a'], template_ids: [1], patient: ['Patient/1', 'Patient/2'] }, 'patient: give it once'],
  ])('refuses %j naming the field', (body, message) => {
    const error = refusal(() => json(body));
    expect(error.code).toBe('bad-request');
    expect(error.status).toBe(400);
    expect(error.message).toContain(message);
  });

  it('names every problem at once', () => {
    const error = refusal(() => json({ date_of_service: 'soon' }));
    expect(error.message).toMatch(/transcripts: required.*template_ids: required.*date_of_service/);
  });

  it('refuses audio without a speech-to-text engine, with its own code', () => {
    const audio = [{ filename: 'visit.wav', contentType: 'audio/wav', data: Buffer.from('RIFF') }];
    const error = refusal(() => parseSubmission(new Map([['template_ids', ['1']]]), audio, false));
    expect(error.code).toBe('speech-to-text-unavailable');
    expect(error.message).toContain('audio_files');
    expect(parseSubmission(new Map([['template_ids', ['1']]]), audio, true).audio).toHaveLength(1);
  });

  it('refuses a body that is not an object', () => {
    expect(refusal(() => fieldsFromJson([1])).status).toBe(400);
    expect(refusal(() => fieldsFromJson(undefined)).status).toBe(400);
  });
});

describe('dateOfServiceProblem', () => {
  it('accepts dates and zoned date-times', () => {
    for (const ok of ['2024-05-01', '2024-02-29', '2024-05-01T09:30Z', '2024-05-01T09:30:15.123-05:00']) {
      expect(dateOfServiceProblem(ok)).toBeUndefined();
    }
    for (const bad of ['2023-02-29', '2024-5-1', '2024-05-01T25:00:00Z', 'yesterday']) {
      expect(dateOfServiceProblem(bad)).toBeDefined();
    }
  });
});
