// The built-in generator's documented rules (transcript.ts T1-T4, rules.ts C1 and S1-S3, generator.ts C2-C6).
import { describe, expect, it } from 'vitest';
import { BUILTIN_TEMPLATES } from '../../builtin-templates.js';
import type { ScribeTemplate } from '../../templates.js';
import { BuiltinNoteGenerator, classifyTranscripts, EMPTY_SECTION_TEXT } from './generator.js';
import { assignSections, classify, sectionCategories } from './rules.js';
import { parseTranscript, roleOf, splitSentences } from './transcript.js';

const builtin = (id: number): ScribeTemplate => ({ id, ...BUILTIN_TEMPLATES.get(id)!, builtin: true, updatedAt: null });

const VISIT = `Doctor: Good morning, Ms. Rivera. What brings you in today?
Patient: Hi doctor. I've had a bad cough for about two weeks. It gets worse at night.
Doctor: Any fever or chills?
Patient: No.
Doctor: Are you taking any medications?
Patient: Just ibuprofen 400 mg when I need it.
Doctor: Any allergies?
Patient: Penicillin gives me a rash.
Doctor: Do you smoke?
Patient: No, never.
Doctor: Does anyone in your family have lung disease?
Patient: My father had asthma.
Doctor: Let me listen to your lungs. Your temperature is 98.6 and your lungs are clear to auscultation.
Doctor: Your chest x-ray from last week came back normal.
Doctor: This looks like a post-viral cough. I'll prescribe benzonatate and we'll follow up in two weeks if it is not better.
Patient: Thank you.`;

const sectionsOf = async (id: number, transcripts: string[]) =>
  Object.fromEntries(
    (await new BuiltinNoteGenerator().generate({ template: builtin(id), transcripts })).map((s) => [s.title, s.text]),
  );

describe('transcript (T1-T4)', () => {
  it('splits labelled lines into turns, continuing unlabelled lines and ignoring time stamps', () => {
    const turns = parseTranscript(
      '[00:00:01] Dr. Patel: How are you?\nPatient: Not great.\nMy knee hurts.\n\nNurse: BP: 120/80.',
    );
    expect(turns.map((t) => [t.speaker, t.role, t.sentences])).toEqual([
      ['Dr. Patel', 'clinician', ['How are you?']],
      ['Patient', 'patient', ['Not great.', 'My knee hurts.']],
      ['Nurse', 'clinician', ['BP: 120/80.']],
    ]);
  });

  it('reads a transcript without labels as one turn without a speaker', () => {
    expect(parseTranscript('I have a cough. It started Monday.')).toEqual([
      { speaker: undefined, role: 'unknown', sentences: ['I have a cough.', 'It started Monday.'] },
    ]);
  });

  it('does not take a time or a long phrase before a colon for a speaker', () => {
    expect(parseTranscript('Patient: it started at\n10:30 this morning')[0].sentences).toEqual([
      'it started at 10:30 this morning',
    ]);
    expect(parseTranscript('He told me the following thing: stop')[0].speaker).toBeUndefined();
  });

  it('names roles from labels', () => {
    expect(['Doctor', 'Dr. Smith', 'NP', 'Nurse Practitioner Lee', 'Physician'].map(roleOf)).toEqual(
      Array(5).fill('clinician'),
    );
    expect(['Patient', 'PT', 'Client'].map(roleOf)).toEqual(Array(3).fill('patient'));
    expect(['Mother', 'Wife', 'Interpreter'].map(roleOf)).toEqual(Array(3).fill('companion'));
    expect(['Speaker 1', 'SPEAKER_00', undefined].map(roleOf)).toEqual(Array(3).fill('unknown'));
  });

  it('takes the unknown speaker who asks the most questions for the clinician (T3)', () => {
    const turns = parseTranscript(
      'Speaker 1: I have a headache.\nSpeaker 2: How long? Where does it hurt?\nSpeaker 1: Three days, at the front.',
    );
    expect(turns.map((t) => t.role)).toEqual(['patient', 'clinician', 'patient']);
  });

  it('splits sentences, but not after titles, abbreviations or inside numbers', () => {
    expect(splitSentences('Dr. Smith saw me. Temp was 98.6 today! Was it e.g. high? "Yes." Fine')).toEqual([
      'Dr. Smith saw me.',
      'Temp was 98.6 today!',
      'Was it e.g. high?',
      '"Yes."',
      'Fine',
    ]);
  });
});

describe('categories (C1-C6)', () => {
  it('assigns each sentence by the documented rules, questions and answers together', () => {
    const classified = classifyTranscripts([VISIT]).map((s) => [s.category, s.sentence]);
    expect(classified).toEqual([
      ['chief_complaint', 'What brings you in today?'],
      ['chief_complaint', "I've had a bad cough for about two weeks."],
      ['hpi', 'It gets worse at night.'],
      ['ros', 'Any fever or chills?'],
      ['ros', 'No.'],
      ['medications', 'Are you taking any medications?'],
      ['medications', 'Just ibuprofen 400 mg when I need it.'],
      ['allergies', 'Any allergies?'],
      ['allergies', 'Penicillin gives me a rash.'],
      ['social', 'Do you smoke?'],
      ['social', 'No, never.'],
      ['family', 'Does anyone in your family have lung disease?'],
      ['family', 'My father had asthma.'],
      ['exam', 'Let me listen to your lungs.'],
      ['exam', 'Your temperature is 98.6 and your lungs are clear to auscultation.'],
      ['results', 'Your chest x-ray from last week came back normal.'],
      ['assessment', 'This looks like a post-viral cough.'],
      ['plan', "I'll prescribe benzonatate and we'll follow up in two weeks if it is not better."],
    ]);
  });

  it("keeps a patient's words out of the assessment and plan (clinician-only rules)", () => {
    expect(classify('I think it started on Monday.', 'patient')).toBe('hpi');
    expect(classify('I think this is a sinus infection.', 'clinician')).toBe('assessment');
    expect(classify("I'll order a chest x-ray.", 'clinician')).toBe('plan');
    expect(classify("I'll try to rest more.", 'patient')).toBeUndefined();
  });

  it('makes the first history sentence the chief complaint when nobody asked (C6)', () => {
    const classified = classifyTranscripts(['Patient: My knee hurts. It swelled up after a run.']);
    expect(classified.map((s) => s.category)).toEqual(['chief_complaint', 'hpi']);
  });

  it('leaves pleasantries out and files other unmatched talk as history (C4, C5)', () => {
    const classified = classifyTranscripts([
      'Doctor: Hello! How are you?\nPatient: Okay, thanks. My daughter drove me here.',
    ]);
    expect(classified.map((s) => [s.category, s.sentence])).toEqual([
      ['chief_complaint', 'My daughter drove me here.'],
    ]);
  });

  it('keeps the order of several transcripts and does not carry a question across them', () => {
    const classified = classifyTranscripts(['Doctor: Any allergies?', 'Patient: No.']);
    expect(classified.map((s) => s.category)).toEqual(['allergies']);
  });
});

describe('sections (S1-S3)', () => {
  it('maps section titles to categories', () => {
    expect(sectionCategories('Subjective')).toContain('medications');
    expect(sectionCategories('Objective')).toEqual(['exam', 'results']);
    expect(sectionCategories('Assessment and Plan')).toEqual(['assessment', 'plan']);
    expect(sectionCategories('Drug allergies')).toEqual(['allergies']);
    expect(sectionCategories('Patient goals')).toBeUndefined();
  });

  it('gives each category to the first section that takes it, then fallbacks, then the first free section', () => {
    const assignment = assignSections(['History of Present Illness', 'Pertinent History', 'Exam', 'Notes']);
    expect(assignment.hpi).toBe(0);
    expect(assignment.medications).toBe(1);
    expect(assignment.results).toBe(2); // results → exam
    expect(assignment.assessment).toBe(3); // no section, no fallback: the free section
    const none = assignSections(['Plan']);
    expect(none.hpi).toBe(-1); // nothing takes it and there is no free section: left out
    expect(none.assessment).toBe(0); // assessment → plan
  });
});

describe('BuiltinNoteGenerator', () => {
  it('writes a SOAP note with speaker turns kept', async () => {
    const note = await sectionsOf(1, [VISIT]);
    expect(Object.keys(note)).toEqual(['Subjective', 'Objective', 'Assessment', 'Plan']);
    expect(note.Subjective.split('\n').slice(0, 4)).toEqual([
      'Doctor: What brings you in today?',
      "Patient: I've had a bad cough for about two weeks. It gets worse at night.",
      'Doctor: Any fever or chills?',
      'Patient: No.',
    ]);
    expect(note.Objective).toBe(
      'Doctor: Let me listen to your lungs. Your temperature is 98.6 and your lungs are clear to auscultation.\nDoctor: Your chest x-ray from last week came back normal.',
    );
    expect(note.Assessment).toBe('Doctor: This looks like a post-viral cough.');
    expect(note.Plan).toContain("I'll prescribe benzonatate");
    expect(Object.values(note).join('\n')).not.toContain('Thank you');
  });

  it('writes a history and physical, with "Not discussed." where nothing was said', async () => {
    const note = await sectionsOf(2, [VISIT]);
    expect(note['Chief Complaint']).toBe(
      "Doctor: What brings you in today?\nPatient: I've had a bad cough for about two weeks.",
    );
    expect(note['History of Present Illness']).toBe('Patient: It gets worse at night.');
    expect(note.Allergies).toBe('Doctor: Any allergies?\nPatient: Penicillin gives me a rash.');
    expect(note['Family History']).toBe(
      'Doctor: Does anyone in your family have lung disease?\nPatient: My father had asthma.',
    );
    expect(note['Diagnostic Results']).toBe('Doctor: Your chest x-ray from last week came back normal.');
    expect(note['Past Medical History']).toBe(EMPTY_SECTION_TEXT);
  });

  it('is deterministic', async () => {
    const first = await sectionsOf(3, [VISIT]);
    for (let i = 0; i < 3; i++) expect(await sectionsOf(3, [VISIT])).toEqual(first);
  });
});
