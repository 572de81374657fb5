// The built-in generator's rules: which category a sentence belongs to, and which template section takes
// which categories. Data, not code, so that docs/scribe.md can list them and tests can pin them.
import type { Role } from './transcript.js';

export const CATEGORIES = [
  'chief_complaint',
  'hpi',
  'ros',
  'pmh',
  'medications',
  'allergies',
  'social',
  'family',
  'exam',
  'results',
  'assessment',
  'plan',
] as const;

export type Category = (typeof CATEGORIES)[number];

/** What the patient tells: the categories a "Subjective" or a generic "History" section takes. */
export const HISTORY_CATEGORIES: readonly Category[] = [
  'chief_complaint',
  'hpi',
  'ros',
  'pmh',
  'medications',
  'allergies',
  'social',
  'family',
];

const SYMPTOMS =
  'pain|pains|painful|aches?|aching|hurts?|hurting|sore|fevers?|feverish|chills|cough|coughing|sore throat|short(ness)? of breath|breathless|wheez\\w*|nause\\w*|vomit\\w*|throwing up|diarrh\\w*|constipat\\w*|dizz\\w*|lightheaded|fatigued?|tired|weak(ness)?|numb(ness)?|tingling|rash(es)?|itch\\w*|swelling|swollen|bleeding|congest\\w*|runny nose|sneez\\w*|palpitations|night sweats|weight (loss|gain)|headaches?|migraines?|insomnia|trouble sleeping|anxious|anxiety|depress\\w*|burning|cramp\\w*|stiff(ness)?|bruis\\w*|chest pain|heartburn|blurry|faint\\w*';

/** Speakers whose sentences a rule applies to; `unknown` (unlabelled text) is always allowed. */
type Speakers = 'anyone' | 'clinician' | 'patient';

export interface Rule {
  readonly category: Category;
  readonly speakers: Speakers;
  readonly pattern: RegExp;
  /** Only sentences that are (or are not) questions. */
  readonly question?: boolean;
}

const re = (source: string): RegExp => new RegExp(source, 'i');

/**
 * Rule C1: the first rule (in this order) whose pattern matches a sentence and whose speakers include the
 * speaker's role gives the sentence its category. Clinician-only rules keep a patient's "I think it started
 * on Monday" out of the assessment; patient-only rules keep a clinician's questions out of the history.
 */
export const RULES: readonly Rule[] = [
  {
    category: 'chief_complaint',
    speakers: 'clinician',
    question: true,
    pattern: re(
      "what (brings|brought) you (in|here|to)|what can i (do for|help you with)|how can i help|what('s| is| seems to be) (going on|the (problem|matter|issue)|bothering you)|reason for (your|the|today's) visit|what are you here for",
    ),
  },
  {
    category: 'chief_complaint',
    speakers: 'patient',
    pattern: re(
      "\\b(i'm|i am|we're|we are) here (today )?(for|because|about|to)\\b|brings? (me|us|him|her) in|\\b(came|come|coming) in (today )?(for|because|about|with)\\b|reason (i'm|i am) here|main (problem|concern|complaint) is",
    ),
  },
  {
    category: 'results',
    speakers: 'anyone',
    pattern: re(
      '\\b(labs?|lab work|lab results?|results?|blood (work|tests?)|x-?rays?|ct( scan)?|mri|ultrasound|ecg|ekg|a1c|hemoglobin|cholesterol|glucose|culture|biopsy|imaging|scan|swab|test)\\b.*\\b(came back|shows?|showed|shown|reveal(s|ed)?|(is|are|was|were) (normal|abnormal|elevated|high|low|negative|positive|fine|unremarkable))',
    ),
  },
  {
    category: 'exam',
    speakers: 'clinician',
    pattern: re(
      "\\b(on exam(ination)?|exam(ination)? (shows|showed|is|was|reveals?)|let me (take a look|look|listen|check|examine|feel|see|press)|let's (take a look|listen|check|have a look)|i('m| am) going to (listen|look|examine|check|feel|press)|(take|took) a (look|listen)|blood pressure (is|was|of|today)|heart rate|pulse (is|was|ox)|temperature (is|was)|respiratory rate|oxygen (saturation|sat|level)|o2 sat|sats? (is|are|was|were)|vitals?|bmi|weigh(t is|ing) \\d|(lungs?|heart|abdomen|belly|throat|ears?|eardrums?|eyes?|pupils|skin|neck|lymph nodes|tonsils|joint|knee|ankle|wound) (sounds?|is|are|looks?|feels?|seems?|appears?)|clear to auscultation|auscultat\\w*|palpat\\w*|tender(ness)?|murmurs?|reflexes|range of motion|no (edema|murmurs?|tenderness|lymphadenopathy)|\\d+ over \\d+|\\d{2,3}/\\d{2,3}|mm ?hg|beats per minute|bpm|degrees)\\b",
    ),
  },
  {
    category: 'assessment',
    speakers: 'clinician',
    pattern: re(
      "\\b(assessment|diagnos\\w*|impression|differential|consistent with|suggestive of|most likely|likely|probably|looks like (a |an )?|sounds like (a |an |you )?|appears to be|i suspect|suspicious for|rule out|i think (this|it|you|that)('s| is| are| has| have| might| may)|this is (a |an )?\\w+ (infection|strain|sprain)|you have (a |an )?)",
    ),
  },
  {
    category: 'plan',
    speakers: 'clinician',
    pattern: re(
      "\\b(plan|we('ll| will)|i('ll| will)|let's|let us|i('m| am) going to|we('re| are) going to|i'd like (to|you to)|i want you to|i would like|you should|make sure|recommend\\w*|prescrib\\w*|start (you|him|her) on|refer\\w*|follow[- ]?up|come back|return (to|if|in)|schedul\\w*|order(ing)?|increase|decrease|stop taking|continue (taking|the|your|with)|keep taking|call (us|me|the office)|if (it|the|your|symptoms?) (gets?|becomes?|doesn't|does not|don't|do not|worsens?)|instructions?|take (it|one|two|\\d+) )",
    ),
  },
  { category: 'allergies', speakers: 'anyone', pattern: re('\\ballerg\\w*') },
  {
    category: 'medications',
    speakers: 'anyone',
    pattern: re(
      '\\b(medications?|medicines?|meds|taking|pills?|tablets?|capsules?|inhaler|insulin|prescriptions?|dose|dosage|\\d+ ?(mg|milligrams?|mcg|micrograms?|units?)|over the counter|ibuprofen|acetaminophen|paracetamol|tylenol|advil|aspirin|naproxen|antibiotics?|amoxicillin|lisinopril|metformin|atorvastatin|statin|levothyroxine|albuterol)\\b',
    ),
  },
  {
    category: 'family',
    speakers: 'anyone',
    pattern: re(
      '\\b(family history|runs in (the|my|our) family|anyone in (your|the|my) family|(mother|father|mom|mum|dad|brother|sister|parents?|grandmother|grandfather|grandparents?|aunt|uncle|siblings?)\\b.*\\b(had|has|have|died|passed|diagnosed|history))',
    ),
  },
  {
    category: 'social',
    speakers: 'anyone',
    pattern: re(
      '\\b(smok(e|es|ed|er|ing)|cigarettes?|tobacco|vap(e|es|ing)|alcohol|drink(s|ing)? (alcohol|socially|a (day|week|night)|per (day|week))|how much (do you )?drink|do you drink|beers?|wine|liquor|recreational|drugs|marijuana|cannabis|exercis\\w*|work(s|ing)? (as|at|in)|my job|occupation|lives? (with|alone)|live (with|alone)|married|divorced|widowed|retired|diet)\\b',
    ),
  },
  {
    category: 'pmh',
    speakers: 'anyone',
    pattern: re(
      '\\b(history of|diagnosed with|surger(y|ies)|operations?|operated|hospitali[sz]\\w*|past medical|medical history|medical problems|chronic|(have|has|had) (diabetes|hypertension|high blood pressure|asthma|copd|heart disease|cancer|arthritis|depression|thyroid))\\b',
    ),
  },
  {
    category: 'ros',
    speakers: 'anyone',
    pattern: re(
      `\\b(denies|negative for|review of systems|any (other )?(${SYMPTOMS})|(no|not any|haven't had any|have not had any|don't have any|do not have any|without) (${SYMPTOMS}))\\b`,
    ),
  },
  {
    category: 'hpi',
    speakers: 'anyone',
    pattern: re(
      `\\b(${SYMPTOMS}|since|started|began|begun|worse|worsening|better|improv\\w*|on and off|constant|comes and goes|how long|when did|for (about |almost |over |nearly |the (past|last) )?(a|an|one|two|three|four|five|six|seven|several|few|couple( of)?|\\d+) (days?|weeks?|months?|years?|hours?))\\b`,
    ),
  },
];

/**
 * Rule C4: sentences that are only pleasantries are left out of the note (when no rule above gave them a
 * category and they do not answer a question that had one).
 */
export const SMALL_TALK = re(
  "^((hi|hello|hey|good (morning|afternoon|evening)|thanks|thank you|you're welcome|bye|goodbye|see you|take care|nice to (meet|see) you|how are you|how's it going|i'm (doing )?(fine|good|well|ok|okay))\\b[^!?]{0,40}|(ok(ay)?|alright|all right|sure|great|perfect|sounds good|got it|i see|mm-?hmm|uh-?huh|right|yes|yeah|yep|no|nope|fine|good)([ ,]+[\\w']+){0,2})[.!?]*$",
);

/** Does a rule's speaker restriction admit this role? */
export function admits(speakers: Speakers, role: Role): boolean {
  if (role === 'unknown' || speakers === 'anyone') return true;
  if (speakers === 'clinician') return role === 'clinician';
  return role === 'patient' || role === 'companion';
}

/** Rule C1: the category of one sentence, or undefined when no rule matches. */
export function classify(sentence: string, role: Role): Category | undefined {
  const question = sentence.endsWith('?');
  for (const rule of RULES) {
    if (rule.question !== undefined && rule.question !== question) continue;
    if (admits(rule.speakers, role) && rule.pattern.test(sentence)) return rule.category;
  }
  return undefined;
}

export interface SectionRule {
  readonly pattern: RegExp;
  readonly categories: readonly Category[];
}

/**
 * Rule S1: the categories a template section takes, from its title: the first rule that matches the title
 * (case-insensitive). A section no rule matches is a free section.
 */
export const SECTION_RULES: readonly SectionRule[] = [
  {
    pattern: re(
      'chief complaint|reason for (the )?(visit|consult\\w*|referral|encounter)|presenting (complaint|problem)',
    ),
    categories: ['chief_complaint'],
  },
  { pattern: re('subjective'), categories: HISTORY_CATEGORIES },
  { pattern: re('present illness|\\bhpi\\b|interval history|history of (the )?present'), categories: ['hpi'] },
  { pattern: re('review of systems|\\bros\\b'), categories: ['ros'] },
  {
    pattern: re('past (medical |surgical )?history|\\bpmh\\b|medical history|surgical history|problem list'),
    categories: ['pmh'],
  },
  { pattern: re('allerg'), categories: ['allergies'] },
  { pattern: re('medication|prescription|\\bmeds\\b|\\bdrugs?\\b'), categories: ['medications'] },
  { pattern: re('social'), categories: ['social'] },
  { pattern: re('family'), categories: ['family'] },
  { pattern: re('objective'), categories: ['exam', 'results'] },
  { pattern: re('assessment (and|&) plan|\\ba ?/ ?p\\b|impression (and|&) plan'), categories: ['assessment', 'plan'] },
  { pattern: re('result|\\bdata\\b|\\blabs?\\b|laborator|diagnostic|imaging|investigation'), categories: ['results'] },
  { pattern: re('exam|physical|vital|finding'), categories: ['exam'] },
  { pattern: re('assessment|impression|diagnos|problem'), categories: ['assessment'] },
  {
    pattern: re('plan|recommendation|disposition|instruction|follow[- ]?up|next steps|treatment'),
    categories: ['plan'],
  },
  { pattern: re('history|background'), categories: HISTORY_CATEGORIES },
];

/**
 * Rule S3: where a category goes when no section takes it: to the section that takes its fallback (tried in
 * order), else to the template's first free section, else it is left out.
 */
export const FALLBACKS: Readonly<Record<Category, readonly Category[]>> = {
  chief_complaint: ['hpi'],
  hpi: ['chief_complaint'],
  ros: ['hpi'],
  pmh: ['hpi'],
  medications: ['pmh', 'hpi'],
  allergies: ['medications', 'pmh', 'hpi'],
  social: ['hpi'],
  family: ['pmh', 'hpi'],
  exam: ['results'],
  results: ['exam'],
  assessment: ['plan'],
  plan: ['assessment'],
};

/** Rule S1 for one title: its categories, or undefined for a free section. */
export function sectionCategories(title: string): readonly Category[] | undefined {
  return SECTION_RULES.find((rule) => rule.pattern.test(title))?.categories;
}

/**
 * Rules S2 and S3: for each category, the index of the section that shows it (or -1: left out). S2: a
 * category goes to the first section, in template order, that takes it, so that "Pertinent History" after
 * "History of Present Illness" gets the rest of the history but not the present illness.
 */
export function assignSections(titles: readonly string[]): Record<Category, number> {
  const taken = titles.map((title) => sectionCategories(title));
  const direct = (category: Category): number => taken.findIndex((categories) => categories?.includes(category));
  const firstFree = taken.findIndex((categories) => categories === undefined);
  const assignment = {} as Record<Category, number>;
  for (const category of CATEGORIES) {
    let index = direct(category);
    for (const fallback of FALLBACKS[category]) {
      if (index >= 0) break;
      index = direct(fallback);
    }
    assignment[category] = index >= 0 ? index : firstFree;
  }
  return assignment;
}
