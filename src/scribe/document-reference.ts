// A completed note as a FHIR R4 DocumentReference (https://hl7.org/fhir/R4/documentreference.html): status
// current, docStatus preliminary (a draft no clinician has signed yet), the template's LOINC document type,
// the patient as subject, the encounter and date of service as context, the note as a text/plain
// attachment, and two identifiers back to the scribe record: `identifier` (system SCRIBE_ID_SYSTEM, value
// the scribe id, shared by every note of the record) and `masterIdentifier` (`<scribe id>-<template id>`,
// unique to this note). So `GET /fhir/DocumentReference?identifier=<SCRIBE_ID_SYSTEM>|42` finds a record's
// notes, and `?patient=Patient/<id>` a patient's.
import type { FhirResource } from '../storage/store.js';
import type { NoteSection } from './engines/engine.js';
import type { ScribeRecord } from './records.js';
import { LOINC_SYSTEM } from './templates.js';
import type { ScribeTemplate } from './templates.js';

export const SCRIBE_ID_SYSTEM = 'https://ambient-fhir.dev/fhir/sid/scribe-id';
export const SCRIBE_NOTE_SYSTEM = 'https://ambient-fhir.dev/fhir/sid/scribe-note';
const CATEGORY_SYSTEM = 'http://hl7.org/fhir/us/core/CodeSystem/us-core-documentreference-category';

/** The note as plain text: a short header, then each section under its title. */
export function noteText(
  record: Pick<ScribeRecord, 'id' | 'patientName' | 'dateOfService'>,
  template: Pick<ScribeTemplate, 'name'>,
  sections: readonly NoteSection[],
): string {
  const header = [template.name];
  if (record.patientName) header.push(`Patient name: ${record.patientName}`);
  if (record.dateOfService) header.push(`Date of service: ${record.dateOfService}`);
  header.push(`Scribe record: ${record.id}`);
  const body = sections.map((s) => `${s.title}\n${'-'.repeat(Math.min(s.title.length, 80))}\n${s.text}`);
  return `${[header.join('\n'), ...body].join('\n\n')}\n`;
}

export interface NoteDocument {
  readonly record: ScribeRecord;
  readonly template: ScribeTemplate;
  readonly sections: readonly NoteSection[];
  /** The generator's name, for the description. */
  readonly generator: string;
  /** When the note was written (ISO instant). */
  readonly date: string;
}

export function documentReference(note: NoteDocument): FhirResource {
  const { record, template, sections, date } = note;
  const text = noteText(record, template, sections);
  const context: Record<string, unknown> = {};
  if (record.encounter) context.encounter = [{ reference: record.encounter }];
  if (record.dateOfService) context.period = { start: record.dateOfService };
  return {
    resourceType: 'DocumentReference',
    masterIdentifier: { system: SCRIBE_NOTE_SYSTEM, value: `${record.id}-${template.id}` },
    identifier: [{ system: SCRIBE_ID_SYSTEM, value: String(record.id) }],
    status: 'current',
    docStatus: 'preliminary',
    type: {
      coding: [{ system: LOINC_SYSTEM, code: template.documentType.code, display: template.documentType.display }],
      text: template.name,
    },
    category: [{ coding: [{ system: CATEGORY_SYSTEM, code: 'clinical-note', display: 'Clinical Note' }] }],
    ...(record.patient ? { subject: { reference: record.patient } } : {}),
    date,
    description: `${template.name} drafted by the ambient scribe (${note.generator} generator) from scribe record ${record.id}`,
    content: [
      {
        attachment: {
          contentType: 'text/plain; charset=utf-8',
          data: Buffer.from(text, 'utf8').toString('base64'),
          title: template.name,
          creation: date,
        },
      },
    ],
    ...(Object.keys(context).length > 0 ? { context } : {}),
  };
}
