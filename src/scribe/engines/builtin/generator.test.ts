// The built-in generator's documented rules (transcript.ts T1-T5, rules.ts C1, C4 and S1-S3, dialogue.ts D1-D7).
import { describe, expect, it } from 'vitest';
import { BUILTIN_TEMPLATES } from '../../builtin-templates.js';
import type { ScribeTemplate } from '../../templates.js';
import { classifyTranscripts } from './dialogue.js';
import { BuiltinNoteGenerator, EMPTY_SECTION_TEXT } from './generator.js';
import { assignSections, classify, isPleasantry, sectionCategories } from './rules.js';
import { loadVisits, transcriptOf } from '../../../../test/support/scribe-visits.js';
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

/** The category of each sentence of these transcripts, `-` for a sentence the note leaves out. */
const categories = (...transcripts: string[]) =>
  classifyTranscripts(transcripts).map((s) => [s.category ?? '-', s.sentence]);

describe('categories (C1, C4) and the dialogue (D1-D7)', () => {
  it('assigns each sentence by the documented rules, questions and answers together', () => {
    expect(categories(VISIT)).toEqual([
      ['-', 'Good morning, Ms. Rivera.'],
      ['chief_complaint', 'What brings you in today?'],
      ['-', 'Hi doctor.'],
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
      ['-', 'Let me listen to your lungs.'],
      ['exam', 'Your temperature is 98.6 and your lungs are clear to auscultation.'],
      ['results', 'Your chest x-ray from last week came back normal.'],
      ['assessment', 'This looks like a post-viral cough.'],
      ['plan', "I'll prescribe benzonatate and we'll follow up in two weeks if it is not better."],
      ['-', 'Thank you.'],
    ]);
  });

  it("keeps a patient's words out of the assessment and plan (clinician-only rules)", () => {
    expect(classify('I think it started on Monday.', 'patient')).toBe('hpi');
    expect(classify('I think this is a sinus infection.', 'clinician')).toBe('assessment');
    expect(classify("I'll order a chest x-ray.", 'clinician')).toBe('plan');
    expect(classify("I'll try to rest more.", 'patient')).toBeUndefined();
  });

  it('takes a named reason for the visit, or the first answer that is not a pleasantry, for the chief complaint (D1)', () => {
    expect(categories('Doctor: What can I do for you?\nPatient: Morning. My knee hurts. It swelled up.')).toEqual([
      ['chief_complaint', 'What can I do for you?'],
      ['-', 'Morning.'],
      ['chief_complaint', 'My knee hurts.'],
      ['hpi', 'It swelled up.'],
    ]);
    // Vitals first do not hide it, and a "yes" confirms it.
    expect(
      categories(
        'Nurse: Blood pressure is 150 over 90.\nDoctor: We are following up on your blood pressure, is that right?\nPatient: Yes. I check it at home.',
      ).map(([category]) => category),
    ).toEqual(['exam', 'chief_complaint', 'chief_complaint', 'hpi']);
  });

  it("gives an answer its question's category, but not allergies or family history it names (D2)", () => {
    expect(
      categories(
        'Doctor: Has she had ear infections before?\nMother: One last winter. Otherwise healthy. Her brother has asthma.',
      ),
    ).toEqual([
      ['pmh', 'Has she had ear infections before?'],
      ['pmh', 'One last winter.'],
      ['pmh', 'Otherwise healthy.'],
      ['family', 'Her brother has asthma.'],
    ]);
    // A patient's question is answered by the clinician's first sentence.
    expect(
      categories(
        'Doctor: This is a sprain. Wrap it.\nPatient: When can I run again?\nDoctor: Probably in three weeks.',
      ),
    ).toEqual([
      ['assessment', 'This is a sprain.'],
      ['plan', 'Wrap it.'],
      ['plan', 'When can I run again?'],
      ['plan', 'Probably in three weeks.'],
    ]);
  });

  it('follows the phase of the visit: findings, assessment and plan sentences without a cue of their own (D3)', () => {
    expect(
      categories(
        'Doctor: Let me look at your ankle. There is swelling over the outside. The bone is fine. No bruising.\n' +
          'Doctor: This is a sprain of the ankle. Ice it twice a day. Ibuprofen 400 mg will help with the swelling.',
      ),
    ).toEqual([
      ['-', 'Let me look at your ankle.'],
      ['exam', 'There is swelling over the outside.'],
      ['exam', 'The bone is fine.'],
      ['exam', 'No bruising.'],
      ['assessment', 'This is a sprain of the ankle.'],
      ['plan', 'Ice it twice a day.'],
      ['plan', 'Ibuprofen 400 mg will help with the swelling.'],
    ]);
  });

  it("files a patient's questions during the plan with it and leaves out remarks there (D4)", () => {
    expect(
      categories(
        "Doctor: I'll prescribe amoxicillin for ten days.\nPatient: Can she go to school tomorrow?\nDoctor: After a day without fever.\nPatient: That's a relief.",
      ),
    ).toEqual([
      ['plan', "I'll prescribe amoxicillin for ten days."],
      ['plan', 'Can she go to school tomorrow?'],
      ['plan', 'After a day without fever.'],
      ['-', "That's a relief."],
    ]);
  });

  it("files symptoms of the complaint's body system under the present illness, of others under review of systems (D5)", () => {
    const classified = categories(
      'Doctor: What brings you in?\nPatient: It burns when I pee.\nDoctor: Any blood in your urine?\nPatient: No.\nDoctor: Any fever or vomiting?\nPatient: No.',
    );
    expect(classified.map(([category]) => category)).toEqual([
      'chief_complaint',
      'chief_complaint',
      'hpi',
      'hpi',
      'ros',
      'ros',
    ]);
  });

  it('leaves pleasantries and announcements out (D6) and files other unmatched talk as history', () => {
    expect(
      categories(
        "Doctor: Hello! How are you? I'm Dr. Lee.\nPatient: Okay, thanks. My daughter drove me here.\nDoctor: Okay, let me take a look.",
      ),
    ).toEqual([
      ['-', 'Hello!'],
      ['-', 'How are you?'],
      ['-', "I'm Dr. Lee."],
      ['-', 'Okay, thanks.'],
      ['chief_complaint', 'My daughter drove me here.'],
      ['-', 'Okay, let me take a look.'],
    ]);
    expect(isPleasantry("I'm pregnant.")).toBe(false);
  });

  it('tells pleasantries from content by their words and by names (C4)', () => {
    for (const pleasantry of [
      'Come on in.',
      'Good morning, Mr. Okafor.',
      "Hi, I'm Jordan, one of the assistants here.",
    ]) {
      expect(isPleasantry(pleasantry)).toBe(true);
    }
    for (const content of ['Morning sickness.', "I'm pregnant.", 'No fever.', 'Okay, it started Monday.']) {
      expect(isPleasantry(content)).toBe(false);
    }
    expect(classify('I think you should take ibuprofen.', 'clinician')).toBe('plan');
    // "Let me see." is not an announcement: the history goes on.
    expect(
      categories('Doctor: Let me see. Which knee?\nPatient: The left.', 'Patient: I am here for knee pain.'),
    ).toEqual([
      ['hpi', 'Let me see.'],
      ['hpi', 'Which knee?'],
      ['hpi', 'The left.'],
      ['chief_complaint', 'I am here for knee pain.'],
    ]);
  });

  it('makes the first history sentence the chief complaint when nobody asked (D7)', () => {
    const classified = classifyTranscripts(['Patient: My knee hurts. It swelled up after a run.']);
    expect(classified.map((s) => s.category)).toEqual(['chief_complaint', 'hpi']);
    // Unlabelled text too.
    expect(categories('My knee hurts. It swelled up after a run. Exam shows an effusion.')).toEqual([
      ['chief_complaint', 'My knee hurts.'],
      ['hpi', 'It swelled up after a run.'],
      ['exam', 'Exam shows an effusion.'],
    ]);
  });

  it('reads unpunctuated speech: questions by their first word, speakers by who asks (T3, T5)', () => {
    expect(
      categories(
        'speaker 1: so what brings you in\nspeaker 2: my back hurts\nspeaker 1: any numbness in your legs\nspeaker 2: no',
      ),
    ).toEqual([
      ['chief_complaint', 'so what brings you in'],
      ['chief_complaint', 'my back hurts'],
      ['ros', 'any numbness in your legs'],
      ['ros', 'no'],
    ]);
  });

  it('keeps the order of several transcripts and does not carry a question across them', () => {
    expect(categories('Doctor: Any allergies?', 'Patient: No.')).toEqual([
      ['allergies', 'Any allergies?'],
      ['-', 'No.'],
    ]);
  });
});

describe('bounded work', () => {
  it('splits and classifies megabytes of one endless sentence, or of one run of stops', () => {
    const words = 'the test came back and the knee is tender and I will refer you '.repeat(40_000);
    const classified = classifyTranscripts([`Doctor: ${words}`, `Patient: ${'!'.repeat(2_000_000)}x`]);
    expect(classified).toHaveLength(2);
    expect(classified[0].sentence.length).toBe(words.trim().length);
    expect(splitSentences(`${'?'.repeat(2_000_000)} Next.`)).toEqual(['?'.repeat(2_000_000), 'Next.']);
  });
});

describe('the knee-pain history and physical of the issue', () => {
  it('files the complaint, the treatment and the plan where a clinician would', async () => {
    const [knee] = loadVisits();
    const note = await sectionsOf(2, [transcriptOf(knee)]);
    expect(note['Chief Complaint']).toBe(
      'Doctor: What brings you in today?\nPatient: My right knee has been bothering me for about three weeks.',
    );
    expect(note['Review of Systems']).toBe(
      'Doctor: Any fevers, or pain in other joints?\nPatient: No, nothing like that.',
    );
    expect(note.Medications).toBe(
      'Doctor: What do you take for those?\nPatient: Amlodipine 5 milligrams and atorvastatin 20 at night.',
    );
    expect(note.Plan).toContain('Switch the ibuprofen to naproxen 500 milligrams twice a day with food');
    expect(note.Plan).toContain("we'll get an MRI and I'll refer you to orthopedics.");
    expect(note['Physical Examination']).toContain("There's a small effusion in the right knee.");
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
      'Doctor: Your temperature is 98.6 and your lungs are clear to auscultation.\nDoctor: Your chest x-ray from last week came back normal.',
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
