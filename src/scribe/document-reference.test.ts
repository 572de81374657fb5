// The DocumentReference a note is filed as: valid R4 (the server's own validator), with the fields
// issue 6 asks for.
import { describe, expect, it } from 'vitest';
import { loadR4Definitions } from '../definitions/registry.js';
import { validateResource } from '../validation/validate.js';
import { BUILTIN_TEMPLATES } from './builtin-templates.js';
import { documentReference, noteText, SCRIBE_ID_SYSTEM, SCRIBE_NOTE_SYSTEM } from './document-reference.js';
import type { ScribeRecord } from './records.js';
import type { ScribeTemplate } from './templates.js';

const definitions = loadR4Definitions();
const template = (id: number): ScribeTemplate => ({
  id,
  ...BUILTIN_TEMPLATES.get(id)!,
  builtin: true,
  updatedAt: null,
});

const record: ScribeRecord = {
  id: 42,
  accountId: 'acct',
  status: 'IN_PROGRESS',
  submittedAt: '2024-05-01T10:00:00.000Z',
  completedAt: null,
  patientName: 'Ana Lima',
  dateOfService: '2024-05-01T09:30:00+02:00',
  additionalContext: null,
  patient: 'Patient/p1',
  encounter: 'Encounter/e1',
  templateIds: [1],
  transcripts: ['Patient: Ouch.'],
  notes: [],
  error: null,
};
const sections = [
  { title: 'Subjective', text: 'Patient: Ouch. Ação — ünïcode.' },
  { title: 'Objective', text: 'Not discussed.' },
];

describe('documentReference', () => {
  it('is a valid R4 DocumentReference with type, subject, encounter, period, attachment and identifiers', () => {
    const resource = documentReference({
      record,
      template: template(1),
      sections,
      generator: 'built-in',
      date: '2024-05-01T10:00:05.000Z',
    });
    expect(validateResource(resource, definitions).filter((i) => i.severity === 'error')).toEqual([]);
    expect(resource).toMatchObject({
      resourceType: 'DocumentReference',
      status: 'current',
      docStatus: 'preliminary',
      masterIdentifier: { system: SCRIBE_NOTE_SYSTEM, value: '42-1' },
      identifier: [{ system: SCRIBE_ID_SYSTEM, value: '42' }],
      type: { coding: [{ system: 'http://loinc.org', code: '11506-3', display: 'Progress note' }], text: 'SOAP note' },
      subject: { reference: 'Patient/p1' },
      date: '2024-05-01T10:00:05.000Z',
      context: { encounter: [{ reference: 'Encounter/e1' }], period: { start: '2024-05-01T09:30:00+02:00' } },
    });
    const attachment = (resource.content as { attachment: { contentType: string; data: string; title: string } }[])[0]
      .attachment;
    expect(attachment.contentType).toBe('text/plain; charset=utf-8');
    expect(attachment.title).toBe('SOAP note');
    expect(Buffer.from(attachment.data, 'base64').toString('utf8')).toBe(noteText(record, template(1), sections));
  });

  it('leaves subject and context out when the record names no patient, encounter or date', () => {
    const bare = { ...record, patient: null, encounter: null, dateOfService: null, patientName: null };
    const resource = documentReference({
      record: bare,
      template: template(2),
      sections,
      generator: 'llm:m',
      date: '2024-05-01T10:00:05Z',
    });
    expect(validateResource(resource, definitions).filter((i) => i.severity === 'error')).toEqual([]);
    expect(resource.subject).toBeUndefined();
    expect(resource.context).toBeUndefined();
    expect((resource.type as { coding: { code: string }[] }).coding[0].code).toBe('34117-2');
  });

  it('writes the note as text: header, then each section under its title', () => {
    expect(noteText(record, template(1), sections)).toBe(
      'SOAP note\nPatient name: Ana Lima\nDate of service: 2024-05-01T09:30:00+02:00\nScribe record: 42\n\n' +
        'Subjective\n----------\nPatient: Ouch. Ação — ünïcode.\n\nObjective\n---------\nNot discussed.\n',
    );
  });
});
