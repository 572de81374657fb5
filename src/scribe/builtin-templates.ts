// The built-in note templates. Their ids are stable forever (clients store them): 1 SOAP note, 2 history and
// physical, 3 consultation note. Ids below 1000 are reserved for built-ins; administrators' templates get
// ids from 1000 up (see templates.ts). An administrator may change a built-in (`template update 1 ...`): the
// change is stored in the database and `template reset 1` brings back the definition below.
import type { TemplateDefinition } from './templates.js';

export const FIRST_CUSTOM_TEMPLATE_ID = 1000;

export const BUILTIN_TEMPLATES: ReadonlyMap<number, TemplateDefinition> = new Map<number, TemplateDefinition>([
  [
    1,
    {
      name: 'SOAP note',
      description: 'Progress note in the Subjective, Objective, Assessment, Plan format.',
      documentType: { code: '11506-3', display: 'Progress note' },
      sections: [
        {
          title: 'Subjective',
          guidance:
            'What the patient (or a companion) reports: the reason for the visit, the history of the present illness, relevant past history, medications, allergies, social and family history, and the review of systems.',
        },
        {
          title: 'Objective',
          guidance:
            'What the clinician observes or measures: vital signs, physical examination findings, and test or imaging results discussed during the visit.',
        },
        {
          title: 'Assessment',
          guidance: "The clinician's impression: the diagnosis or differential diagnosis and what supports it.",
        },
        {
          title: 'Plan',
          guidance:
            'What happens next: tests ordered, treatments and prescriptions, referrals, instructions given to the patient and follow-up.',
        },
      ],
    },
  ],
  [
    2,
    {
      name: 'History and physical',
      description: 'Comprehensive history and physical examination note.',
      documentType: { code: '34117-2', display: 'History and physical note' },
      sections: [
        { title: 'Chief Complaint', guidance: 'The reason for the visit, in the patient’s own words where possible.' },
        {
          title: 'History of Present Illness',
          guidance:
            'Onset, location, duration, character, aggravating and relieving factors, and course of the problem.',
        },
        {
          title: 'Past Medical History',
          guidance: 'Earlier illnesses, chronic conditions, operations and hospital stays.',
        },
        { title: 'Medications', guidance: 'Current medications with dose and frequency when stated.' },
        { title: 'Allergies', guidance: 'Allergies and intolerances, with the reaction when stated.' },
        {
          title: 'Social History',
          guidance: 'Tobacco, alcohol and drug use, occupation, living situation, exercise and diet.',
        },
        { title: 'Family History', guidance: 'Conditions of blood relatives relevant to the patient.' },
        { title: 'Review of Systems', guidance: 'Symptoms asked about by body system, positive and negative.' },
        { title: 'Physical Examination', guidance: 'Vital signs and examination findings.' },
        { title: 'Diagnostic Results', guidance: 'Laboratory, imaging and other test results discussed.' },
        { title: 'Assessment', guidance: 'Diagnoses or differential diagnoses with their reasoning.' },
        { title: 'Plan', guidance: 'Tests, treatments, referrals, patient instructions and follow-up.' },
      ],
    },
  ],
  [
    3,
    {
      name: 'Consultation note',
      description: "A specialist's consultation, answering the referring clinician's question.",
      documentType: { code: '11488-4', display: 'Consult note' },
      sections: [
        { title: 'Reason for Consultation', guidance: 'The question or problem the patient was referred for.' },
        { title: 'History of Present Illness', guidance: 'The history of the problem the consultation is about.' },
        {
          title: 'Pertinent History',
          guidance: 'Relevant past medical history, medications, allergies, social and family history.',
        },
        { title: 'Examination', guidance: 'Vital signs, examination findings and results discussed.' },
        { title: 'Impression', guidance: "The consultant's assessment." },
        {
          title: 'Recommendations',
          guidance: 'Recommended tests, treatments and follow-up for the referring clinician.',
        },
      ],
    },
  ],
]);
